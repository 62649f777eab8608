package envelope

import "github.com/bmcis/knowledge/mcp-adapter/internal/tokens"

// EstimateJSON estimates, part by part, the tokens of the envelope's compact
// JSON encoding without producing it. The results are walked field by field;
// the small fixed-shape parts are priced from their own encodings.
func EstimateJSON(env *Envelope) TokenBreakdown {
	var b TokenBreakdown
	var sink tokens.Sink

	sink.Byte('[')
	for i, r := range env.Results {
		if i > 0 {
			sink.Byte(',')
		}
		EstimateObject(&sink, r)
	}
	sink.Byte(']')
	b.Results = sink.Total()

	b.Pagination = estimatePagination(&sink, env.Pagination)
	b.Warnings = estimateMarshaled(&sink, env.Warnings)
	b.Metadata = estimateMetadata(&sink, env)
	return b
}

// EstimateJSONMetadata is EstimateJSON(env).Metadata alone: the part that
// holds the per-call fields (request id, timestamp, timings), which a kept
// answer estimates again on each replay, its other parts being the same.
func EstimateJSONMetadata(env *Envelope) int {
	var sink tokens.Sink
	return estimateMetadata(&sink, env)
}

// estimateMetadata prices _metadata, execution_context and the other small
// members, and the member names and punctuation between the parts, on a
// sink that holds nothing (Total resets it).
func estimateMetadata(sink *tokens.Sink, env *Envelope) int {
	// Timings and token counts are not final yet: price typical values.
	ec := env.ExecutionContext
	ec.TokensEstimated, ec.TokensUsed = placeholder(ec.TokensEstimated, 999), placeholder(ec.TokensUsed, 999)
	ec.ExecutionTimeMS = placeholderF(ec.ExecutionTimeMS, 12.34)
	if ec.TokenBreakdown != nil {
		ec.TokenBreakdown = &TokenBreakdown{Results: 999, Metadata: 999, Pagination: 99, Warnings: 9}
	}
	meta := estimateMarshaled(sink, env.Metadata) + estimateMarshaled(sink, ec)
	if env.QueryAnalysis != nil {
		meta += estimateMarshaled(sink, env.QueryAnalysis)
	}
	if env.Error != nil {
		meta += estimateMarshaled(sink, env.Error)
	}
	if env.NeedsInput != nil {
		meta += estimateMarshaled(sink, env.NeedsInput)
	}
	// member names and the punctuation between the parts
	sink.Raw(`{"_metadata":,"results":,"pagination":,"execution_context":,"warnings":}`)
	return meta + sink.Total()
}

func estimateMarshaled(sink *tokens.Sink, v any) int {
	b, err := Marshal(v)
	if err != nil {
		return 0
	}
	sink.Raw(string(b))
	return sink.Total()
}

// estimatePagination prices the cursor as an opaque token and the rest from
// its encoding.
func estimatePagination(sink *tokens.Sink, p *Pagination) int {
	if p == nil || p.Cursor == nil {
		return estimateMarshaled(sink, p)
	}
	q := *p
	empty := ""
	q.Cursor = &empty
	return estimateMarshaled(sink, q) + tokens.EstimateOpaque(*p.Cursor)
}

func placeholder(v, typical int) int {
	if v == 0 {
		return typical
	}
	return v
}

func placeholderF(v, typical float64) float64 {
	if v == 0 {
		return typical
	}
	return v
}
