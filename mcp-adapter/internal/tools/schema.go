package tools

import (
	"encoding/json"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// The output schemas describe the envelope every answer uses, errors and
// needsInput answers included. They use only keywords that mean the same
// in JSON Schema draft-07 and 2020-12 and no $ref or format, so any MCP
// client's validator reads them alike.

type schema = map[string]any

func obj(props schema, required ...string) schema {
	if required == nil {
		required = []string{}
	}
	return schema{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func str() schema             { return schema{"type": "string"} }
func nullStr() schema         { return schema{"type": []string{"string", "null"}} }
func integer(min int) schema  { return schema{"type": "integer", "minimum": min} }
func boolean() schema         { return schema{"type": "boolean"} }
func number() schema          { return schema{"type": "number"} }
func unit() schema            { return schema{"type": "number", "minimum": 0, "maximum": 1} }
func arrayOf(s schema) schema { return schema{"type": "array", "items": s} }
func enum(vals ...string) schema {
	return schema{"type": "string", "enum": vals}
}
func nullable(s schema) schema { return schema{"anyOf": []any{s, schema{"type": "null"}}} }

const timestampPattern = `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`

func timestamp() schema { return schema{"type": "string", "pattern": timestampPattern} }

func metadataSchema() schema {
	return obj(schema{
		"operation":  str(),
		"version":    schema{"type": "string", "const": envelope.Version},
		"timestamp":  timestamp(),
		"request_id": schema{"type": "string", "minLength": 1},
		"status":     enum(string(envelope.StatusSuccess), string(envelope.StatusPartial), string(envelope.StatusError)),
		"message":    nullStr(),
		"visual_hints": obj(schema{
			"highlight_top":       integer(0),
			"group_by":            nullStr(),
			"show_confidence":     boolean(),
			"collapse_duplicates": boolean(),
			"expandable_previews": boolean(),
		}, "highlight_top", "group_by", "show_confidence", "collapse_duplicates", "expandable_previews"),
	}, "operation", "version", "timestamp", "request_id", "status", "message")
}

func paginationSchema() schema {
	return nullable(obj(schema{
		"cursor":          nullStr(),
		"page_size":       schema{"type": "integer", "minimum": 1, "maximum": 50},
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
		"cache_key":          nullStr(),
		"database_time_ms":   schema{"type": "number", "minimum": 0},
		"formatting_time_ms": schema{"type": "number", "minimum": 0},
	}, "tokens_estimated", "tokens_used", "cache_hit", "execution_time_ms", "request_id",
		"token_breakdown", "cache_key", "database_time_ms", "formatting_time_ms")
}

func warningSchema() schema {
	return obj(schema{
		"level": enum(string(envelope.LevelInfo), string(envelope.LevelWarning), string(envelope.LevelError)),
		"code": enum(warnings.TokenLimitWarning, warnings.TokenLimitExceeded, warnings.PartialResults,
			warnings.CacheMissSlow, warnings.LowQualityResults, warnings.DeprecatedParameter,
			warnings.RateLimiterDegraded, warnings.ResolvedByElicitation),
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
		"code":           enum(codes...),
		"message":        str(),
		"retryable":      boolean(),
		"suggestion":     nullStr(),
		"details":        schema{"type": "object"},
		"allowed_fields": arrayOf(str()),
		"suggestions":    arrayOf(str()),
		"remaining": obj(schema{
			"minute": integer(0), "hour": integer(0), "day": integer(0),
		}, "minute", "hour", "day"),
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

func queryAnalysisSchema() schema {
	return obj(schema{
		"matched_terms":   arrayOf(str()),
		"unmatched_terms": arrayOf(str()),
	}, "matched_terms", "unmatched_terms")
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

// chunkFieldSchemas types every chunk and search result field.
func chunkFieldSchemas() schema {
	return schema{
		"chunk_id":          integer(0),
		"hybrid_score":      unit(),
		"rank":              integer(1),
		"source_file":       str(),
		"source_category":   nullStr(),
		"chunk_index":       integer(0),
		"total_chunks":      integer(0),
		"chunk_snippet":     str(),
		"context_header":    nullStr(),
		"chunk_text":        str(),
		"similarity_score":  unit(),
		"bm25_score":        unit(),
		"score_type":        enum("hybrid", "bm25", "vector"),
		"chunk_token_count": integer(0),
	}
}

func searchResultSchema() schema {
	props := schema{}
	for _, f := range projection.AllSearchFields() {
		props[f] = chunkFieldSchemas()[f]
	}
	props["confidence"] = obj(schema{
		"score_reliability": unit(), "source_quality": unit(), "recency": unit(), "overall": unit(),
	}, "score_reliability", "source_quality", "recency", "overall")
	props["ranking"] = obj(schema{
		"percentile":   schema{"type": "integer", "minimum": 0, "maximum": 100},
		"explanation":  str(),
		"score_method": enum("hybrid", "bm25", "vector"),
	}, "percentile", "explanation", "score_method")
	props["deduplication"] = obj(schema{
		"is_duplicate":      boolean(),
		"similar_chunk_ids": arrayOf(integer(0)),
		"confidence":        unit(),
	}, "is_duplicate", "similar_chunk_ids", "confidence")
	return obj(props)
}

func chunkResultSchema() schema {
	props := schema{}
	for _, f := range projection.AllChunkFields() {
		props[f] = chunkFieldSchemas()[f]
	}
	return obj(props)
}

func vendorResultSchema() schema {
	entity := obj(schema{
		"entity_id":   str(),
		"name":        str(),
		"entity_type": str(),
		"confidence":  unit(),
		"snippet":     nullStr(),
	}, "entity_id", "name", "entity_type", "confidence", "snippet")
	relationship := obj(schema{
		"relationship_id":   str(),
		"source_id":         str(),
		"target_id":         str(),
		"relationship_type": str(),
		"metadata": nullable(obj(schema{
			"confidence":            unit(),
			"relationship_metadata": schema{"type": "object"},
		}, "confidence", "relationship_metadata")),
	}, "relationship_id", "source_id", "target_id", "relationship_type", "metadata")
	distribution := schema{"type": "object", "additionalProperties": integer(0)}
	return obj(schema{
		"vendor_name":      str(),
		"entity_ids":       arrayOf(str()),
		"relationship_ids": arrayOf(str()),
		"statistics": obj(schema{
			"entity_count":                   integer(0),
			"relationship_count":             integer(0),
			"entity_type_distribution":       distribution,
			"relationship_type_distribution": distribution,
		}, "entity_count", "relationship_count", "entity_type_distribution", "relationship_type_distribution"),
		"top_entities":  arrayOf(entity),
		"last_updated":  nullable(timestamp()),
		"entities":      schema{"type": "array", "items": entity, "maxItems": 100},
		"relationships": schema{"type": "array", "items": relationship, "maxItems": 500},
	}, "vendor_name")
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
