package tool

import (
	"bytes"
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
	propBit  map[string]uint // index of each property, to spot a repeated key
	required []string
	reqBit   map[string]uint // index of each required name
	reqAll   uint64          // all required bits set
	noExtra  bool            // additionalProperties: false
	extra    *fastNode       // additionalProperties as a schema; nil = anything (unless noExtra)
	items    *fastNode       // nil = anything

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
		if len(m) > 64 {
			return false // too many to track repeated keys in a bit set
		}
		n.props = make(map[string]*fastNode, len(m))
		n.propBit = make(map[string]uint, len(m))
		for name, sub := range m {
			f := buildFast(sub)
			if f == nil {
				return false
			}
			n.propBit[name] = uint(len(n.props))
			n.props[name] = f
		}
		return true
	case "required":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		if len(l) > 64 {
			return false
		}
		n.reqBit = make(map[string]uint, len(l))
		for _, x := range l {
			s, ok := x.(string)
			if !ok {
				return false
			}
			if _, dup := n.reqBit[s]; !dup {
				n.reqBit[s] = uint(len(n.required))
				n.required = append(n.required, s)
			}
		}
		n.reqAll = 1<<len(n.required) - 1
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

// validJSON reports whether the JSON document data certainly satisfies the
// schema, reading the bytes directly so that nothing is allocated. It does
// not fully check the JSON syntax (the caller does: json.Unmarshal or
// json.Valid), but never reads out of bounds on malformed input.
func (n *fastNode) validJSON(data []byte) bool {
	i, ok := n.scan(data, skipWS(data, 0))
	return ok && skipWS(data, i) == len(data)
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString reads the string starting at data[i] == '"' and returns the
// index after the closing quote, its contents and whether it has escapes.
func scanString(data []byte, i int) (next int, content []byte, escaped, ok bool) {
	start := i + 1
	for j := start; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, data[start:j], escaped, true
		}
	}
	return len(data), nil, false, false
}

// scan checks the value at data[i] and returns the index after it. A nil
// node accepts any value.
func (n *fastNode) scan(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; {
	case c == '{':
		return n.scanObject(data, i)
	case c == '[':
		return n.scanArray(data, i)
	case c == '"':
		next, content, escaped, ok := scanString(data, i)
		if !ok {
			return next, false
		}
		if n == nil {
			return next, true
		}
		return next, n.stringOK(content, escaped)
	case c == 't' || c == 'f' || c == 'n':
		lit, bit, val := "null", fastNull, any(nil)
		if c == 't' {
			lit, bit, val = "true", fastBoolean, true
		} else if c == 'f' {
			lit, bit, val = "false", fastBoolean, false
		}
		end := i + len(lit)
		if end > len(data) || string(data[i:end]) != lit {
			return end, false
		}
		if n == nil {
			return end, true
		}
		return end, n.typeOK(bit) && n.enumOK(val)
	case c == '-' || ('0' <= c && c <= '9'):
		j := i + 1
		for j < len(data) && strings.IndexByte("+-.eE0123456789", data[j]) >= 0 {
			j++
		}
		if n == nil {
			return j, true
		}
		return j, n.numberOK(data[i:j])
	}
	return i, false
}

// maxUntrackedKeys bounds the keys of one object that scanObject checks
// for repetition by rescanning the object (keys that are not properties:
// map entries, members of a free-form value); past it the full validator
// decides, so the rescans stay cheap.
const maxUntrackedKeys = 16

func (n *fastNode) scanObject(data []byte, i int) (int, bool) {
	if n != nil && (!n.typeOK(fastObject) || n.enum != nil) {
		return i, false
	}
	var seen, props uint64
	untracked := 0
	i = skipWS(data, i+1)
	first := i
	if i < len(data) && data[i] == '}' {
		return i + 1, n == nil || len(n.required) == 0
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, false
		}
		keyStart := i
		next, key, escaped, ok := scanString(data, i)
		// Keys that are not valid UTF-8 decode with U+FFFD in place of the
		// bad bytes, so distinct raw keys may decode alike: leave them to
		// the full validator.
		if !ok || escaped || !utf8.Valid(key) {
			return next, false
		}
		i = skipWS(data, next)
		if i >= len(data) || data[i] != ':' {
			return i, false
		}
		i = skipWS(data, i+1)
		// A repeated key is invalid (the full validator rejects it): the
		// validator would see only the last value while encoding/json
		// merges repeated objects into one struct.
		var sub *fastNode
		tracked := false
		if n != nil {
			if p, known := n.props[string(key)]; known {
				sub = p
				tracked = true
				bit := uint64(1) << n.propBit[string(key)]
				if props&bit != 0 {
					return i, false
				}
				props |= bit
				if bit, req := n.reqBit[string(key)]; req {
					seen |= 1 << bit
				}
			} else if n.noExtra {
				return i, false
			} else {
				sub = n.extra
			}
		}
		if !tracked {
			if untracked++; untracked > maxUntrackedKeys || keyBefore(data, first, keyStart, key) {
				return i, false
			}
		}
		if i, ok = sub.scan(data, i); !ok {
			return i, false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return i, false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1, n == nil || seen == n.reqAll
		default:
			return i, false
		}
	}
}

// keyBefore reports whether key is one of the keys of the object members
// that lie in data[from:end], members the caller has already scanned (so
// well formed, with unescaped keys). When in doubt it reports true.
func keyBefore(data []byte, from, end int, key []byte) bool {
	for i := from; i < end; {
		next, k, _, ok := scanString(data, i)
		if !ok || string(k) == string(key) {
			return true
		}
		i = skipWS(data, skipWS(data, next)+1) // past the colon
		if i, ok = (*fastNode)(nil).scan(data, i); !ok {
			return true
		}
		i = skipWS(data, skipWS(data, i)+1) // past the comma
	}
	return false
}

func (n *fastNode) scanArray(data []byte, i int) (int, bool) {
	var items *fastNode
	if n != nil {
		if !n.typeOK(fastArray) || n.enum != nil {
			return i, false
		}
		items = n.items
	}
	count := 0
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, n == nil || n.countOK(0)
	}
	for {
		var ok bool
		if i, ok = items.scan(data, i); !ok {
			return i, false
		}
		count++
		i = skipWS(data, i)
		if i >= len(data) {
			return i, false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case ']':
			return i + 1, n == nil || n.countOK(count)
		default:
			return i, false
		}
	}
}

func (n *fastNode) countOK(c int) bool {
	return (n.minItems < 0 || c >= n.minItems) && (n.maxItems < 0 || c <= n.maxItems)
}

func (n *fastNode) stringOK(content []byte, escaped bool) bool {
	if !n.typeOK(fastString) {
		return false
	}
	constrained := n.enum != nil || n.minLength >= 0 || n.maxLength >= 0 || n.pattern != nil || n.format != nil
	if !constrained {
		return true
	}
	if escaped || !utf8.Valid(content) {
		return false // leave unescaping (and U+FFFD replacement) to the full validator
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if s, ok := e.(string); ok && s == string(content) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.minLength >= 0 || n.maxLength >= 0 {
		l := utf8.RuneCount(content)
		if (n.minLength >= 0 && l < n.minLength) || (n.maxLength >= 0 && l > n.maxLength) {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.Match(content) {
		return false
	}
	return n.format == nil || n.format(string(content))
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

func (n *fastNode) numberOK(num []byte) bool {
	isInt := !bytes.ContainsAny(num, ".eE")
	switch {
	case n.types == 0 || n.types&fastNumber != 0:
	case n.types&fastInteger != 0 && isInt:
	default:
		return false // wrong type, or 1.0-style integers: let the validator decide
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if e, ok := e.(json.Number); ok && string(e) == string(num) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.format != nil || (!n.hasMin && !n.hasMax) {
		return n.format == nil
	}
	f, ok := smallInt(num)
	if !ok {
		var err error
		if f, err = strconv.ParseFloat(string(num), 64); err != nil {
			return false
		}
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

// smallInt parses an integer of at most 15 digits exactly, without
// allocating.
func smallInt(b []byte) (float64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return float64(v), true
}
