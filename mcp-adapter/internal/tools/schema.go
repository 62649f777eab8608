package tools

import (
	"encoding/json"

	"github.com/bmcis/knowledge/platform/ratelimit"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/jschema"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
)

// The output schemas describe the envelope every answer uses, errors and
// needsInput answers included (jschema says which keywords they use). The
// result fields' schemas come from the field registry in projection.

type schema = jschema.S

var (
	obj      = jschema.Obj
	str      = jschema.Str
	nullStr  = jschema.NullStr
	integer  = jschema.Int
	boolean  = jschema.Bool
	unit     = jschema.Unit
	arrayOf  = jschema.Array
	enum     = jschema.Enum
	nullable = jschema.Nullable
)

func timestamp() schema { return jschema.Timestamp() }

func metadataSchema() schema {
	return obj(schema{
		"operation":  str(),
		"version":    schema{"type": "string", "const": envelope.Version},
		"timestamp":  timestamp(),
		"request_id": schema{"type": "string", "minLength": 1},
		"status":     enum(string(envelope.StatusSuccess), string(envelope.StatusPartial), string(envelope.StatusError)),
		"message":    nullStr(),
		// Only the hints that differ from their defaults are written.
		"visual_hints": obj(schema{
			"highlight_top":   withDefault(integer(0), envelope.HintDefaults.HighlightTop),
			"group_by":        withDefault(nullStr(), *envelope.HintDefaults.GroupBy),
			"show_confidence": withDefault(boolean(), envelope.HintDefaults.ShowConfidence),
		}),
	}, "operation", "version", "timestamp", "request_id", "status")
}

func paginationSchema() schema {
	return nullable(obj(schema{
		"cursor":          nullStr(),
		"page_size":       schema{"type": "integer", "minimum": limits.SearchPageSize.Min, "maximum": limits.SearchPageSize.Max},
		"has_more":        boolean(),
		"total_available": integer(0),
		"returned_count":  integer(0),
	}, "cursor", "page_size", "has_more", "total_available", "returned_count"))
}

func executionContextSchema() schema {
	return obj(schema{
		"tokens_estimated":  integer(0),
		"tokens_used":       integer(0),
		"cache_hit":         boolean(),
		"execution_time_ms": schema{"type": "number", "exclusiveMinimum": 0},
		"request_id":        schema{"type": "string", "minLength": 1},
		"token_breakdown": obj(schema{
			"results":    integer(0),
			"metadata":   integer(0),
			"pagination": integer(0),
			"warnings":   integer(0),
		}, "results", "metadata", "pagination", "warnings"),
		"database_time_ms":   schema{"type": "number", "minimum": 0},
		"formatting_time_ms": schema{"type": "number", "minimum": 0},
	}, "tokens_estimated", "tokens_used", "cache_hit", "execution_time_ms", "request_id")
}

func warningSchema() schema {
	return obj(schema{
		"level":      enum(string(envelope.LevelInfo), string(envelope.LevelWarning), string(envelope.LevelError)),
		"code":       enum(warnings.Codes...),
		"message":    str(),
		"suggestion": nullStr(),
	}, "level", "code", "message", "suggestion")
}

func errorSchema() schema {
	codes := make([]string, len(apierr.AllCodes))
	for i, c := range apierr.AllCodes {
		codes[i] = string(c)
	}
	return obj(schema{
		"code":             enum(codes...),
		"message":          str(),
		"retryable":        boolean(),
		"suggestion":       nullStr(),
		"details":          schema{"type": "object"},
		"allowed_fields":   arrayOf(str()),
		"suggestions":      arrayOf(str()),
		"remaining":        remainingSchema(),
		"reset_in_seconds": integer(0),
	}, "code", "message", "retryable", "suggestion", "details")
}

func needsInputSchema() schema {
	return obj(schema{
		"kind":    schema{"type": "string", "const": envelope.NeedsInputKind},
		"type":    schema{"type": "string", "const": "elicitation"},
		"message": str(),
		"needsInput": obj(schema{
			"fields":      schema{"type": "array", "items": str(), "minItems": 1},
			"reason":      str(),
			"suggestions": schema{"type": "object", "additionalProperties": arrayOf(str())},
		}, "fields", "reason", "suggestions"),
		"options": arrayOf(obj(schema{
			"label":       str(),
			"value":       str(),
			"description": str(),
			"field":       str(),
		}, "label", "value", "field")),
	}, "kind", "type", "message", "needsInput", "options")
}

// withDefault annotates s with the value a left-out member stands for.
func withDefault(s schema, v any) schema {
	s["default"] = v
	return s
}

// queryAnalysisSchema: what the page could not answer from the query alone
// (signals.QueryAnalysis); written only when one list is not empty.
func queryAnalysisSchema() schema {
	return obj(schema{
		"unmatched_terms": nonEmpty(arrayOf(str())),
		"vendors":         nonEmpty(arrayOf(str())),
	})
}

// nonEmpty makes an array schema require an item: a list that would be
// empty is left out.
func nonEmpty(s schema) schema {
	s["minItems"] = 1
	return s
}

func envelopeSchema(result schema) schema {
	return obj(schema{
		"_metadata":         metadataSchema(),
		"results":           arrayOf(result),
		"pagination":        paginationSchema(),
		"execution_context": executionContextSchema(),
		"warnings":          arrayOf(warningSchema()),
		"query_analysis":    queryAnalysisSchema(),
		"error":             errorSchema(),
		"needs_input":       needsInputSchema(),
	}, "_metadata", "results", "pagination", "execution_context", "warnings")
}

func searchResultSchema() schema {
	props := projection.Properties(projection.AllSearchFields())
	props["confidence"] = obj(schema{
		"score_reliability": unit(), "source_quality": unit(), "recency": unit(), "overall": unit(),
	}, "score_reliability", "source_quality", "recency", "overall")
	props["ranking"] = obj(schema{
		"percentile":   schema{"type": "integer", "minimum": 0, "maximum": 100},
		"explanation":  str(),
		"score_method": enum(projection.ScoreMethods()...),
	}, "percentile", "explanation", "score_method")
	props["deduplication"] = obj(schema{
		"is_duplicate":      boolean(),
		"similar_chunk_ids": arrayOf(integer(0)),
		"confidence":        unit(),
	}, "is_duplicate", "similar_chunk_ids", "confidence")
	return obj(props)
}

func chunkResultSchema() schema {
	return obj(projection.Properties(projection.AllChunkFields()))
}

func vendorResultSchema() schema {
	return obj(projection.Properties(projection.AllFields(projection.VendorResult)),
		projection.CommonFields(projection.VendorResult)...)
}

// OutputSchema returns the output schema of a tool.
func OutputSchema(tool string) json.RawMessage {
	var s schema
	switch tool {
	case ToolSemanticSearch:
		s = envelopeSchema(searchResultSchema())
	case ToolFindVendorInfo:
		s = envelopeSchema(vendorResultSchema())
		s["properties"].(schema)["results"] = schema{"type": "array", "items": vendorResultSchema(), "maxItems": 1}
	case ToolGetChunks:
		s = envelopeSchema(chunkResultSchema())
	default:
		panic("no output schema for " + tool)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

// remainingSchema has one property per rate-limit tier (platform/ratelimit).
func remainingSchema() schema {
	props := schema{}
	names := make([]string, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		props[t.Name] = integer(0)
		names[i] = t.Name
	}
	return obj(props, names...)
}
