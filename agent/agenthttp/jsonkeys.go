package agenthttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// checkKeys refuses what encoding/json would quietly accept in a body: a
// key given twice in one object (json keeps the last, a proxy or an audit
// log may read the first) and a key that names a field of t only when
// case is ignored ({"TEXT": …} for "text"). data is one valid JSON value.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkValue(dec, t, "")
}

// walkValue reads one value from dec, checking the keys of its objects
// against t (nil when nothing is known of its shape).
func walkValue(dec *json.Decoder, t reflect.Type, at string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
		elem = t.Elem()
	}
	if d == '[' {
		for dec.More() {
			if err := walkValue(dec, elem, at+"[]"); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("field %q is given twice", at+key)
		}
		seen[key] = true
		var ft reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct && !t.Implements(unmarshalerType) && !reflect.PointerTo(t).Implements(unmarshalerType):
			f, exact := fieldOf(t, key)
			if f != nil && !exact {
				return fmt.Errorf("field %q: keys are case-sensitive; the field is %q", at+key, jsonName(*f))
			}
			if f != nil {
				ft = f.Type
			}
		case t != nil && t.Kind() == reflect.Map:
			ft = elem
		}
		if err := walkValue(dec, ft, at+key+"."); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldOf finds the field of struct t that key decodes into, and whether
// key names it exactly (encoding/json also takes a key differing in case).
// Embedded structs' fields are searched as encoding/json does.
func fieldOf(t reflect.Type, key string) (*reflect.StructField, bool) {
	var fold *reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name := jsonName(f)
		if name == "-" {
			continue
		}
		if f.Anonymous && f.Tag.Get("json") == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if g, exact := fieldOf(et, key); g != nil {
					if exact {
						return g, true
					}
					fold = g
				}
				continue
			}
		}
		if name == key {
			return &f, true
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold = &f
		}
	}
	return fold, false
}

// jsonName is the key encoding/json writes field f under.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "-"
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}
