package envelope

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Field is one member of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object whose members keep their insertion order, so
// projected results read in a stable, documented order (chunk_id first).
//
// Values may be string, Text, bool, nil, int, int32, int64, float64,
// *string, Object, []Object, []string, []int64, []any, map[string]int,
// map[string]any; anything else is encoded with encoding/json.
type Object []Field

// Set appends a member.
func (o *Object) Set(key string, value any) { *o = append(*o, Field{key, value}) }

// Get returns the value of key.
func (o Object) Get(key string) (any, bool) {
	for _, f := range o {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Keys lists the member names in order.
func (o Object) Keys() []string {
	keys := make([]string, len(o))
	for i, f := range o {
		keys[i] = f.Key
	}
	return keys
}

// Str returns the non-empty string value of key (a string, Text or
// *string).
func (o Object) Str(key string) (string, bool) {
	v, _ := o.Get(key)
	switch x := v.(type) {
	case string:
		return x, x != ""
	case Text:
		return x.S, x.S != ""
	case *string:
		if x != nil {
			return *x, *x != ""
		}
	}
	return "", false
}

// Int returns the integer value of key.
func (o Object) Int(key string) (int, bool) {
	v, _ := o.Get(key)
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case int32:
		return int(x), true
	}
	return 0, false
}

// Float returns the float64 value of key.
func (o Object) Float(key string) (float64, bool) {
	v, _ := o.Get(key)
	f, ok := v.(float64)
	return f, ok
}

// Object returns the object value of key.
func (o Object) Object(key string) (Object, bool) {
	v, _ := o.Get(key)
	x, ok := v.(Object)
	return x, ok
}

// Objects returns the list-of-objects value of key.
func (o Object) Objects(key string) ([]Object, bool) {
	v, _ := o.Get(key)
	x, ok := v.([]Object)
	return x, ok
}

// MarshalJSON encodes the members in order, without HTML escaping.
func (o Object) MarshalJSON() ([]byte, error) {
	return appendObject(make([]byte, 0, 64*len(o)+2), o)
}

// Text is a string whose cl100k token count is known (for a chunk's text,
// the count stored at ingestion), so estimates need not guess it.
type Text struct {
	S string
	// Tokens is the token count of S as plain text; 0 when unknown.
	Tokens int
}

// MarshalJSON encodes the text as a JSON string.
func (t Text) MarshalJSON() ([]byte, error) { return appendString(nil, t.S), nil }

func appendObject(buf []byte, o Object) ([]byte, error) {
	buf = append(buf, '{')
	for i, f := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, f.Key)
		buf = append(buf, ':')
		var err error
		if buf, err = appendValue(buf, f.Value); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

func appendValue(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendString(buf, x), nil
	case *string:
		if x == nil {
			return append(buf, "null"...), nil
		}
		return appendString(buf, *x), nil
	case Text:
		return appendString(buf, x.S), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			// As encoding/json: JSON has no such numbers.
			return nil, fmt.Errorf("envelope: unsupported value %v", x)
		}
		return AppendFloat(buf, x), nil
	case Object:
		return appendObject(buf, x)
	case []Object:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendObject(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case []string:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, e)
		}
		return append(buf, ']'), nil
	case []int64:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, e, 10)
		}
		return append(buf, ']'), nil
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendValue(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case map[string]int:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = strconv.AppendInt(buf, int64(x[k]), 10)
		}
		return append(buf, '}'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			var err error
			if buf, err = appendValue(buf, x[k]); err != nil {
				return nil, err
			}
		}
		return append(buf, '}'), nil
	}
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}

// AppendFloat formats f the way encoding/json does for the magnitudes the
// envelope carries (scores, milliseconds).
func AppendFloat(buf []byte, f float64) []byte {
	abs := f
	if abs < 0 {
		abs = -abs
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// like encoding/json: e-07 becomes e-7
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string exactly as encoding/json does with
// HTML escaping off.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '"', '\\':
				buf = append(buf, '\\', b)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
