package tool

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	sjson "github.com/santhosh-tekuri/jsonschema/v5"
)

// fastNode is a small validator for the keywords invopop/jsonschema emits
// for ordinary structs. It runs before the full validator and allocates
// nothing. It is conservative: valid returns true only when the instance is
// certainly valid; anything doubtful (a violation, a number on a bound, an
// enum compared across number spellings) returns false and the compiled
// santhosh-tekuri schema — the authority — decides and explains.
type fastNode struct {
	types    uint8 // bit set of fastType*; 0 means any type
	props    map[string]*fastNode
	required []string
	noExtra  bool      // additionalProperties: false
	extra    *fastNode // additionalProperties as a schema; nil = anything (unless noExtra)
	items    *fastNode // nil = anything

	minItems, maxItems   int // -1 when absent
	minLength, maxLength int // -1 when absent
	pattern              *regexp.Regexp
	format               func(any) bool
	enum                 []any
	hasMin, hasMax       bool
	min, max             float64 // the strictest bounds; both are compared strictly
}

const (
	fastNull uint8 = 1 << iota
	fastBoolean
	fastInteger
	fastNumber
	fastString
	fastArray
	fastObject
)

var fastTypeBits = map[string]uint8{
	"null": fastNull, "boolean": fastBoolean, "integer": fastInteger, "number": fastNumber,
	"string": fastString, "array": fastArray, "object": fastObject,
}

// annotations are keywords that never affect validity.
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$comment": true, "contentEncoding": true,
	"contentMediaType": true, "contentSchema": true,
}

// buildFast compiles a decoded schema into a fastNode, or returns nil when
// the schema uses a keyword the fast path does not implement.
func buildFast(schema any) *fastNode {
	switch s := schema.(type) {
	case bool:
		if s {
			return &fastNode{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
		}
		return nil
	case map[string]any:
		n := &fastNode{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
		for k, v := range s {
			if annotations[k] {
				continue
			}
			if !n.set(k, v) {
				return nil
			}
		}
		return n
	}
	return nil
}

func (n *fastNode) set(k string, v any) bool {
	switch k {
	case "type":
		switch t := v.(type) {
		case string:
			b, ok := fastTypeBits[t]
			n.types |= b
			return ok
		case []any:
			for _, x := range t {
				s, _ := x.(string)
				b, ok := fastTypeBits[s]
				if !ok {
					return false
				}
				n.types |= b
			}
			return true
		}
		return false
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		n.props = make(map[string]*fastNode, len(m))
		for name, sub := range m {
			f := buildFast(sub)
			if f == nil {
				return false
			}
			n.props[name] = f
		}
		return true
	case "required":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, x := range l {
			s, ok := x.(string)
			if !ok {
				return false
			}
			n.required = append(n.required, s)
		}
		return true
	case "additionalProperties":
		if b, ok := v.(bool); ok {
			n.noExtra = !b
			return true
		}
		n.extra = buildFast(v)
		return n.extra != nil
	case "items":
		n.items = buildFast(v)
		return n.items != nil
	case "minItems":
		return setInt(&n.minItems, v)
	case "maxItems":
		return setInt(&n.maxItems, v)
	case "minLength":
		return setInt(&n.minLength, v)
	case "maxLength":
		return setInt(&n.maxLength, v)
	case "pattern":
		s, ok := v.(string)
		if !ok {
			return false
		}
		re, err := regexp.Compile(s)
		n.pattern = re
		return err == nil
	case "format":
		s, ok := v.(string)
		if !ok {
			return false
		}
		n.format = sjson.Formats[s] // unknown formats are ignored, as by the compiler
		return true
	case "enum":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, x := range l {
			switch x.(type) {
			case string, bool, nil, json.Number:
			default:
				return false
			}
		}
		n.enum = l
		return true
	case "minimum", "exclusiveMinimum":
		var f float64
		if !setFloat(&f, v) {
			return false
		}
		if !n.hasMin || f > n.min {
			n.min = f
		}
		n.hasMin = true
		return true
	case "maximum", "exclusiveMaximum":
		var f float64
		if !setFloat(&f, v) {
			return false
		}
		if !n.hasMax || f < n.max {
			n.max = f
		}
		n.hasMax = true
		return true
	}
	return false
}

func setInt(dst *int, v any) bool {
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	i, err := strconv.Atoi(string(num))
	*dst = i
	return err == nil && i >= 0
}

func setFloat(dst *float64, v any) bool {
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(num), 64)
	*dst = f
	return err == nil && !math.IsInf(f, 0)
}

// valid reports whether v certainly satisfies the schema. v is a value
// decoded with json.Decoder.UseNumber.
func (n *fastNode) valid(v any) bool {
	switch x := v.(type) {
	case nil:
		return n.typeOK(fastNull) && n.enumOK(v)
	case bool:
		return n.typeOK(fastBoolean) && n.enumOK(v)
	case string:
		if !n.typeOK(fastString) || !n.enumOK(v) {
			return false
		}
		if n.minLength >= 0 || n.maxLength >= 0 {
			l := utf8.RuneCountInString(x)
			if (n.minLength >= 0 && l < n.minLength) || (n.maxLength >= 0 && l > n.maxLength) {
				return false
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			return false
		}
		return n.format == nil || n.format(x)
	case json.Number:
		return n.numberOK(x)
	case []any:
		if !n.typeOK(fastArray) || n.enum != nil {
			return false
		}
		if (n.minItems >= 0 && len(x) < n.minItems) || (n.maxItems >= 0 && len(x) > n.maxItems) {
			return false
		}
		if n.items != nil {
			for _, e := range x {
				if !n.items.valid(e) {
					return false
				}
			}
		}
		return true
	case map[string]any:
		if !n.typeOK(fastObject) || n.enum != nil {
			return false
		}
		for k, e := range x {
			if p, ok := n.props[k]; ok {
				if !p.valid(e) {
					return false
				}
				continue
			}
			if n.noExtra || (n.extra != nil && !n.extra.valid(e)) {
				return false
			}
		}
		for _, r := range n.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		return true
	}
	return false
}

func (n *fastNode) typeOK(bit uint8) bool { return n.types == 0 || n.types&bit != 0 }

func (n *fastNode) enumOK(v any) bool {
	if n.enum == nil {
		return true
	}
	for _, e := range n.enum {
		if e == v {
			return true
		}
	}
	return false
}

func (n *fastNode) numberOK(num json.Number) bool {
	s := string(num)
	isInt := !strings.ContainsAny(s, ".eE")
	switch {
	case n.types == 0 || n.types&fastNumber != 0:
	case n.types&fastInteger != 0 && isInt:
	default:
		return false // wrong type, or 1.0-style integers: let the validator decide
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if e, ok := e.(json.Number); ok && e == num {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.format != nil && !n.format(num) {
		return false
	}
	if !n.hasMin && !n.hasMax {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	// Parsing rounds monotonically, so a strict float inequality implies the
	// exact decimal one; equality is left to the exact validator.
	if n.hasMin && !(f > n.min) {
		return false
	}
	if n.hasMax && !(f < n.max) {
		return false
	}
	return true
}
