// Package envelope defines the response envelope every tool answer uses,
// errors included: _metadata, results, pagination, execution_context,
// warnings, plus the optional query_analysis, error and needs_input members.
package envelope

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/bmcis/knowledge/platform/ratelimit"
)

// Version is the envelope format version reported in _metadata.version.
const Version = "1.0.0"

// Status is _metadata.status.
type Status string

// Statuses.
const (
	StatusSuccess Status = "success"
	StatusPartial Status = "partial"
	StatusError   Status = "error"
)

// Level is a warning's level.
type Level string

// Warning levels.
const (
	LevelInfo    Level = "info"
	LevelWarning Level = "warning"
	LevelError   Level = "error"
)

// TimestampLayout is RFC 3339 to the second with an explicit zone, as the
// reference shows it: milliseconds cost 2 tokens on every answer and
// execution_context already times the call.
const TimestampLayout = "2006-01-02T15:04:05Z07:00"

// Envelope is the whole answer of a tool call.
type Envelope struct {
	Metadata         Metadata         `json:"_metadata"`
	Results          []Object         `json:"results"`
	Pagination       *Pagination      `json:"pagination"`
	ExecutionContext ExecutionContext `json:"execution_context"`
	Warnings         []Warning        `json:"warnings"`
	QueryAnalysis    *QueryAnalysis   `json:"query_analysis,omitempty"`
	Error            *Error           `json:"error,omitempty"`
	NeedsInput       *NeedsInput      `json:"needs_input,omitempty"`
}

// Metadata is _metadata.
type Metadata struct {
	Operation string `json:"operation"`
	Version   string `json:"version"`
	Timestamp string `json:"timestamp"`
	RequestID string `json:"request_id"`
	Status    Status `json:"status"`
	// Message is left out on a plain success (the reference's Optional).
	Message     *string      `json:"message,omitempty"`
	VisualHints *VisualHints `json:"visual_hints,omitempty"`
}

// VisualHints tell a client how the results may be laid out. A member at
// its default (HintDefaults, also the output schema's "default") is left
// out when written: see VisualHints.Compact. The reference's
// collapse_duplicates and expandable_previews are not written: they only
// repeat the results (a result flagged deduplication.is_duplicate; results
// that carry chunk_snippet or chunk_text), docs/MCP.md "Token economy".
type VisualHints struct {
	HighlightTop   int     `json:"highlight_top"`
	GroupBy        *string `json:"group_by"`
	ShowConfidence bool    `json:"show_confidence"`
}

// HintDefaults are the visual hints a client assumes for a member left
// out: the common search layout (the top 3 highlighted, grouped by
// category, confidence shown).
var HintDefaults = VisualHints{HighlightTop: 3, GroupBy: Ptr("source_category"), ShowConfidence: true}

// Hints returns v, or nil when every member is at its default, so that
// _metadata leaves visual_hints out.
func Hints(v *VisualHints) *VisualHints {
	if len(v.Compact()) == 0 {
		return nil
	}
	return v
}

// MarshalJSON writes only the members that differ from their defaults.
func (v VisualHints) MarshalJSON() ([]byte, error) {
	o := v.Compact()
	if o == nil {
		o = Object{}
	}
	return o.MarshalJSON()
}

// Compact returns the members that differ from HintDefaults, in the
// reference's order, or nil when every member is at its default (the
// reference has the hints "when available"; a default says nothing).
func (v *VisualHints) Compact() Object {
	if v == nil {
		return nil
	}
	var o Object
	if v.HighlightTop != HintDefaults.HighlightTop {
		o = append(o, Field{Key: "highlight_top", Value: v.HighlightTop})
	}
	if (v.GroupBy == nil) != (HintDefaults.GroupBy == nil) || (v.GroupBy != nil && *v.GroupBy != *HintDefaults.GroupBy) {
		o = append(o, Field{Key: "group_by", Value: v.GroupBy})
	}
	if v.ShowConfidence != HintDefaults.ShowConfidence {
		o = append(o, Field{Key: "show_confidence", Value: v.ShowConfidence})
	}
	return o
}

// Pagination is the paging state of a paginated answer.
type Pagination struct {
	Cursor         *string `json:"cursor"`
	PageSize       int     `json:"page_size"`
	HasMore        bool    `json:"has_more"`
	TotalAvailable int     `json:"total_available"`
	ReturnedCount  int     `json:"returned_count"`
}

// ExecutionContext reports cost and timing.
type ExecutionContext struct {
	TokensEstimated int     `json:"tokens_estimated"`
	TokensUsed      int     `json:"tokens_used"`
	CacheHit        bool    `json:"cache_hit"`
	ExecutionTimeMS float64 `json:"execution_time_ms"`
	RequestID       string  `json:"request_id"`
	// The extended metrics below are written only where they say
	// something (the reference has them "when available"): see
	// respond.fill.
	TokenBreakdown   *TokenBreakdown `json:"token_breakdown,omitempty"`
	DatabaseTimeMS   float64         `json:"database_time_ms,omitempty"`
	FormattingTimeMS float64         `json:"formatting_time_ms,omitempty"`
}

// TokenBreakdown splits tokens_estimated by part of the answer.
type TokenBreakdown struct {
	Results    int `json:"results"`
	Metadata   int `json:"metadata"`
	Pagination int `json:"pagination"`
	Warnings   int `json:"warnings"`
}

// Total sums the parts.
func (b TokenBreakdown) Total() int { return b.Results + b.Metadata + b.Pagination + b.Warnings }

// Warning is an actionable note about the answer.
type Warning struct {
	Level      Level   `json:"level"`
	Code       string  `json:"code"`
	Message    string  `json:"message"`
	Suggestion *string `json:"suggestion"`
}

// QueryAnalysis says what a search page could not answer from the query
// alone, and only that: the content words no result matched, and the
// vendors the query names (find_vendor_info answers about each). The
// matched terms are the query's other content words, and each result
// carries its own, so they are not repeated (docs/MCP.md "Token economy").
type QueryAnalysis struct {
	UnmatchedTerms []string `json:"unmatched_terms,omitempty"`
	// Vendors are the names of the vendors the query names; the results'
	// mentions carry their entity ids.
	Vendors []string `json:"vendors,omitempty"`
}

// Error is the error member of an error answer.
type Error struct {
	Code       string         `json:"code"`
	Message    string         `json:"message"`
	Retryable  bool           `json:"retryable"`
	Suggestion *string        `json:"suggestion"`
	Details    map[string]any `json:"details"`
	// The members below mirror, at the top level of the error, the detail
	// keys the reference shows there for these codes.
	AllowedFields  []string   `json:"allowed_fields,omitempty"`
	Suggestions    []string   `json:"suggestions,omitempty"`
	Remaining      *Remaining `json:"remaining,omitempty"`
	ResetInSeconds *int       `json:"reset_in_seconds,omitempty"`
}

// Remaining is the rate-limit budget left per tier, in tier order: a JSON
// object keyed by tier name, {"minute": …, "hour": …, "day": …} for the
// tiers of platform/ratelimit.
type Remaining []TierCount

// TierCount is one tier's units left.
type TierCount struct {
	Tier  string
	Value int64
}

// NewRemaining lists every tier of platform/ratelimit (0 when the reply
// lacks it, so the contract's keys are always there), then any further tier
// the reply names, in its order.
func NewRemaining(reply []TierCount) Remaining {
	out := make(Remaining, 0, len(ratelimit.Tiers)+len(reply))
	for _, t := range ratelimit.Tiers {
		out = append(out, TierCount{Tier: t.Name})
	}
	for _, c := range reply {
		i := slices.IndexFunc(out, func(x TierCount) bool { return x.Tier == c.Tier })
		if i < 0 {
			out = append(out, c)
		} else {
			out[i].Value = c.Value
		}
	}
	return out
}

// Get returns tier's value (0 when absent).
func (r Remaining) Get(tier string) int64 {
	for _, c := range r {
		if c.Tier == tier {
			return c.Value
		}
	}
	return 0
}

// MarshalJSON writes the tiers as one object, in tier order.
func (r Remaining) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, c := range r {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, c.Tier)
		b = append(b, ':')
		b = strconv.AppendInt(b, c.Value, 10)
	}
	return append(b, '}'), nil
}

// NeedsInputKind is the discriminator of a needsInput payload.
const NeedsInputKind = "needsInput:v1"

// NeedsInput asks the caller for missing or ambiguous input.
type NeedsInput struct {
	Kind       string        `json:"kind"`
	Type       string        `json:"type"`
	Message    string        `json:"message"`
	NeedsInput NeedsInputAsk `json:"needsInput"`
	Options    []Option      `json:"options"`
}

// NeedsInputAsk names the fields needed and why.
type NeedsInputAsk struct {
	Fields      []string            `json:"fields"`
	Reason      string              `json:"reason"`
	Suggestions map[string][]string `json:"suggestions"`
}

// Option is one selectable value for a field.
type Option struct {
	Label       string `json:"label"`
	Value       string `json:"value"`
	Description string `json:"description,omitempty"`
	Field       string `json:"field"`
}

// Ptr returns a pointer to s; nil for the empty string.
func Ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Timestamp formats t as _metadata.timestamp expects.
func Timestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// Encode encodes env as Marshal does, byte for byte. The results are
// written by Object's own encoder and put in place after encoding/json has
// written the rest: given them through Object.MarshalJSON, encoding/json
// would scan every byte of them again to compact and check them, the
// larger part of the envelope (issue 32).
func Encode(env *Envelope) ([]byte, error) {
	if env.Results == nil {
		return Marshal(env)
	}
	results, err := EncodeResults(env.Results)
	if err != nil {
		return nil, err
	}
	return EncodeWith(env, results)
}

// EncodeResults encodes results as Encode writes them.
func EncodeResults(results []Object) ([]byte, error) {
	return appendValue(make([]byte, 0, 512*len(results)), results)
}

// EncodeWith is Encode with env.Results already encoded (EncodeResults of
// the same results): a kept answer replayed encodes only the rest, its
// request id and timings (tools' answer cache).
func EncodeWith(env *Envelope, results []byte) ([]byte, error) {
	rest := *env
	rest.Results = nil
	j, err := Marshal(&rest)
	if err != nil {
		return nil, err
	}
	// _metadata comes first and has no member named results; a quote inside
	// a JSON string is escaped, so this matches only the envelope's member.
	const member = `,"results":null,`
	i := bytes.Index(j, []byte(member))
	if i < 0 {
		return Marshal(env)
	}
	at := i + len(member) - len("null,")
	out := make([]byte, 0, len(j)+len(results))
	out = append(out, j[:at]...)
	out = append(out, results...)
	return append(out, j[at+len("null"):]...), nil
}

// Marshal encodes v compactly without HTML escaping (so "<", ">" and "&"
// stay as they are, which costs fewer tokens and reads better).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // drop the encoder's trailing newline
}
