// Package jschema builds the JSON Schema fragments of the output schemas.
// It uses only keywords that mean the same in draft-07 and 2020-12, and no
// $ref or format, so any MCP client's validator reads them alike.
package jschema

// S is a schema (or a map of property schemas).
type S = map[string]any

// TimestampPattern matches an RFC 3339 timestamp.
const TimestampPattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`

// Obj is a closed object with the given properties and required members.
func Obj(props S, required ...string) S {
	if required == nil {
		required = []string{}
	}
	return S{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// Str is a string.
func Str() S { return S{"type": "string"} }

// NullStr is a string or null.
func NullStr() S { return S{"type": []string{"string", "null"}} }

// Int is an integer of at least min.
func Int(min int) S { return S{"type": "integer", "minimum": min} }

// Bool is a boolean.
func Bool() S { return S{"type": "boolean"} }

// Num is a number.
func Num() S { return S{"type": "number"} }

// Unit is a number in [0, 1].
func Unit() S { return S{"type": "number", "minimum": 0, "maximum": 1} }

// Array is an array of items.
func Array(items S) S { return S{"type": "array", "items": items} }

// Enum is a string among vals.
func Enum(vals ...string) S { return S{"type": "string", "enum": vals} }

// Nullable is s or null.
func Nullable(s S) S { return S{"anyOf": []any{s, S{"type": "null"}}} }

// Timestamp is an RFC 3339 timestamp string.
func Timestamp() S { return S{"type": "string", "pattern": TimestampPattern} }
