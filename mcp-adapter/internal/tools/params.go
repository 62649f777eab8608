package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
)

// args reads tool arguments strictly: unknown names and wrong types are
// INVALID_PARAMS answers that name the parameter, so a model can correct
// its call.
type args struct {
	m   map[string]any
	err *apierr.Error
}

func newArgs(raw any, known ...string) *args {
	a := &args{}
	switch m := raw.(type) {
	case nil:
		a.m = map[string]any{}
	case map[string]any:
		a.m = m
	default:
		a.m = map[string]any{}
		a.fail("arguments", "must be an object", "Pass the parameters as a JSON object.")
		return a
	}
	var unknown []string
	for k := range a.m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		a.fail(unknown[0], "is not a parameter of this tool",
			"Valid parameters: "+strings.Join(known, ", ")+".")
	}
	return a
}

func (a *args) fail(param, problem, suggestion string) {
	if a.err == nil {
		a.err = apierr.NewInvalidParams(param, problem, suggestion)
	}
}

func (a *args) has(name string) bool {
	v, ok := a.m[name]
	return ok && v != nil
}

func (a *args) str(name string) string {
	v, ok := a.m[name]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		a.fail(name, "must be a string", "")
		return ""
	}
	return s
}

// integer reads an integer in [lo, hi]; numeric strings are accepted.
func (a *args) integer(name string, lo, hi int) (int, bool) {
	v, ok := a.m[name]
	if !ok || v == nil {
		return 0, false
	}
	n, ok := toInt(v)
	if !ok {
		a.fail(name, "must be an integer", fmt.Sprintf("Use a whole number between %d and %d.", lo, hi))
		return 0, false
	}
	if n < int64(lo) || n > int64(hi) {
		a.fail(name, fmt.Sprintf("must be between %d and %d", lo, hi), fmt.Sprintf("Use a value between %d and %d.", lo, hi))
		return 0, false
	}
	return int(n), true
}

func (a *args) boolean(name string, def bool) bool {
	v, ok := a.m[name]
	if !ok || v == nil {
		return def
	}
	switch x := v.(type) {
	case bool:
		return x
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b
		}
	}
	a.fail(name, "must be true or false", "")
	return def
}

// strings reads a list of strings; a single string is a list of one.
func (a *args) strings(name string) []string {
	v, ok := a.m[name]
	if !ok || v == nil {
		return nil
	}
	switch x := v.(type) {
	case string:
		// a single field, or a comma-separated list
		var out []string
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				a.fail(name, "must be a list of strings", "")
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	a.fail(name, "must be a list of strings", "")
	return nil
}

// ints reads a list of integers; a single integer, numeric strings and a
// comma-separated string are accepted too.
func (a *args) ints(name string) []int64 {
	v, ok := a.m[name]
	if !ok || v == nil {
		return nil
	}
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case string:
		// "1,2,3" or "[1, 2, 3]"
		x = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(x), "["), "]")
		for _, p := range strings.Split(x, ",") {
			if p = strings.TrimSpace(p); p != "" {
				items = append(items, p)
			}
		}
	default:
		items = []any{x}
	}
	out := make([]int64, 0, len(items))
	for _, e := range items {
		n, ok := toInt(e)
		if !ok {
			a.fail(name, "must be a list of integer ids", "Pass chunk ids as numbers, e.g. [12345, 12346].")
			return nil
		}
		out = append(out, n)
	}
	return out
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.Abs(x) > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}
