package envelope

import (
	"slices"
	"strconv"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// EstimateValue adds to sink the estimated tokens of v's JSON encoding,
// walking the value rather than encoding it. Strings are priced from their
// characters, Text values from their stored token counts; structure is fed
// as the punctuation it will become.
func EstimateValue(sink *tokens.Sink, v any) {
	var num [32]byte
	switch x := v.(type) {
	case nil:
		sink.Raw("null")
	case string:
		sink.JSONString(x)
	case *string:
		if x == nil {
			sink.Raw("null")
		} else {
			sink.JSONString(*x)
		}
	case Text:
		if x.Tokens > 0 {
			sink.Known(tokens.KnownJSONString(x.S, x.Tokens))
		} else {
			sink.JSONString(x.S)
		}
	case bool:
		sink.Raw(strconv.FormatBool(x))
	case int:
		sink.Raw(string(strconv.AppendInt(num[:0], int64(x), 10)))
	case int32:
		sink.Raw(string(strconv.AppendInt(num[:0], int64(x), 10)))
	case int64:
		sink.Raw(string(strconv.AppendInt(num[:0], x, 10)))
	case float64:
		sink.Raw(string(AppendFloat(num[:0], x)))
	case Object:
		EstimateObject(sink, x)
	case []Object:
		sink.Byte('[')
		for i, e := range x {
			if i > 0 {
				sink.Byte(',')
			}
			EstimateObject(sink, e)
		}
		sink.Byte(']')
	case []string:
		sink.Byte('[')
		for i, e := range x {
			if i > 0 {
				sink.Byte(',')
			}
			sink.JSONString(e)
		}
		sink.Byte(']')
	case []int64:
		sink.Byte('[')
		for i, e := range x {
			if i > 0 {
				sink.Byte(',')
			}
			sink.Raw(string(strconv.AppendInt(num[:0], e, 10)))
		}
		sink.Byte(']')
	case []any:
		sink.Byte('[')
		for i, e := range x {
			if i > 0 {
				sink.Byte(',')
			}
			EstimateValue(sink, e)
		}
		sink.Byte(']')
	case map[string]int:
		keys := sortedKeys(x)
		sink.Byte('{')
		for i, k := range keys {
			if i > 0 {
				sink.Byte(',')
			}
			sink.JSONString(k)
			sink.Byte(':')
			sink.Raw(string(strconv.AppendInt(num[:0], int64(x[k]), 10)))
		}
		sink.Byte('}')
	case map[string]any:
		keys := sortedKeys(x)
		sink.Byte('{')
		for i, k := range keys {
			if i > 0 {
				sink.Byte(',')
			}
			sink.JSONString(k)
			sink.Byte(':')
			EstimateValue(sink, x[k])
		}
		sink.Byte('}')
	default:
		// Types outside the list above are small (typed helper structs);
		// their own encoding is the cheapest faithful description.
		if b, err := Marshal(v); err == nil {
			sink.Raw(string(b))
		}
	}
}

// EstimateObject adds the estimate of o's JSON encoding to sink.
func EstimateObject(sink *tokens.Sink, o Object) {
	sink.Byte('{')
	for i, f := range o {
		if i > 0 {
			sink.Byte(',')
		}
		sink.JSONString(f.Key)
		sink.Byte(':')
		EstimateValue(sink, f.Value)
	}
	sink.Byte('}')
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
