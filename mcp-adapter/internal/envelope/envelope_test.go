package envelope_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

func stdEncode(t *testing.T, v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return strings.TrimSuffix(b.String(), "\n")
}

func TestObjectEncodesLikeEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "<html> & co", "\u2028\u2029",
		"\x00\x01\x1f\b\f", "naïve 東京 😀", string([]byte{0xff, 'a', 0xc3})}
	rng := rand.New(rand.NewPCG(7, 9))
	for i := 0; i < 500; i++ {
		b := make([]byte, rng.IntN(20))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		strs = append(strs, string(b))
	}
	for _, s := range strs {
		o := envelope.Object{{Key: "k", Value: s}, {Key: "t", Value: envelope.Text{S: s}}}
		b, err := envelope.Marshal(o)
		require.NoError(t, err)
		require.Equal(t, stdEncode(t, map[string]string{"k": s, "t": s}), string(b), "%q", s)
	}
}

func TestObjectKeepsOrderAndTypes(t *testing.T) {
	s := "x"
	o := envelope.Object{
		{Key: "z", Value: 1}, {Key: "a", Value: int64(2)}, {Key: "f", Value: 0.8751}, {Key: "n", Value: nil},
		{Key: "b", Value: true}, {Key: "p", Value: &s}, {Key: "np", Value: (*string)(nil)},
		{Key: "ids", Value: []int64{3, 4}}, {Key: "ss", Value: []string{"a"}},
		{Key: "m", Value: map[string]int{"b": 2, "a": 1}}, {Key: "ma", Value: map[string]any{"y": "v", "x": []any{1.5, "w"}}},
		{Key: "o", Value: envelope.Object{{Key: "in", Value: 1}}}, {Key: "os", Value: []envelope.Object{{{Key: "e", Value: 0}}}},
		{Key: "small", Value: 1e-7}, {Key: "t", Value: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	b, err := envelope.Marshal(o)
	require.NoError(t, err)
	require.Equal(t, `{"z":1,"a":2,"f":0.8751,"n":null,"b":true,"p":"x","np":null,"ids":[3,4],"ss":["a"],"m":{"a":1,"b":2},"ma":{"x":[1.5,"w"],"y":"v"},"o":{"in":1},"os":[{"e":0}],"small":1e-7,"t":"2026-01-02T03:04:05Z"}`, string(b))
	require.Equal(t, []string{"z", "a", "f", "n", "b", "p", "np", "ids", "ss", "m", "ma", "o", "os", "small", "t"}, o.Keys())
	v, ok := o.Get("f")
	require.True(t, ok)
	require.Equal(t, 0.8751, v)
}

func TestEnvelopeShape(t *testing.T) {
	env := &envelope.Envelope{
		Metadata:         envelope.Metadata{Operation: "op", Version: envelope.Version, Timestamp: envelope.Timestamp(time.Unix(0, 0)), RequestID: "req_1", Status: envelope.StatusSuccess},
		Results:          []envelope.Object{},
		ExecutionContext: envelope.ExecutionContext{RequestID: "req_1"},
		Warnings:         []envelope.Warning{},
	}
	b, err := envelope.Marshal(env)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.ElementsMatch(t, []string{"_metadata", "results", "pagination", "execution_context", "warnings"}, keys(m))
	require.Nil(t, m["pagination"], "pagination is null when not paginated")
	require.Equal(t, "1970-01-01T00:00:00Z", m["_metadata"].(map[string]any)["timestamp"])
	require.NotContains(t, m["_metadata"], "message", "a plain success has no status message")
	require.ElementsMatch(t, []string{"tokens_estimated", "tokens_used", "cache_hit", "execution_time_ms", "request_id"},
		keys(m["execution_context"].(map[string]any)), "extended metrics only where they say something")
}

func TestEstimateJSONWithinTenPercent(t *testing.T) {
	text := strings.Repeat("The incident commander coordinates and decides; they do not debug. ", 40)
	var results []envelope.Object
	for i := 0; i < 10; i++ {
		results = append(results, envelope.Object{
			{Key: "chunk_id", Value: int64(1000 + i)}, {Key: "source_file", Value: "docs/incident-response.md"},
			{Key: "chunk_text", Value: envelope.Text{S: text, Tokens: tokens.Count(text)}}, {Key: "hybrid_score", Value: 0.5123},
		})
	}
	cur := "eyJxdWVyeV9oYXNoIjoiYjZiZTYzZjExNDI0Iiwib2Zmc2V0IjoxMCwicmVzcG9uc2VfbW9kZSI6ImZ1bGwiLCJwYWdlX3NpemUiOjEwfQ.9abqfhcZmgzFMe_X"
	env := &envelope.Envelope{
		Metadata:         envelope.Metadata{Operation: "semantic_search", Version: envelope.Version, Timestamp: "2026-11-01T12:00:00.000Z", RequestID: "req_0123456789abcdef", Status: envelope.StatusSuccess},
		Results:          results,
		Pagination:       &envelope.Pagination{Cursor: &cur, PageSize: 10, HasMore: true, TotalAvailable: 42, ReturnedCount: 10},
		ExecutionContext: envelope.ExecutionContext{RequestID: "req_0123456789abcdef"},
		Warnings:         []envelope.Warning{},
	}
	est := envelope.EstimateJSON(env)
	env.ExecutionContext.TokenBreakdown = &est
	env.ExecutionContext.TokensEstimated = est.Total()
	b, err := envelope.Marshal(env)
	require.NoError(t, err)
	real := tokens.Count(string(b))
	require.InDelta(t, real, est.Total(), 0.1*float64(real))
	require.Greater(t, est.Results, est.Metadata)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestVisualHintsWriteOnlyWhatDiffers(t *testing.T) {
	def := envelope.HintDefaults
	require.Nil(t, envelope.Hints(&def), "all defaults: visual_hints is left out")
	vh := envelope.HintDefaults
	vh.ShowConfidence = false
	vh.GroupBy = nil
	b, err := envelope.Marshal(envelope.Hints(&vh))
	require.NoError(t, err)
	require.JSONEq(t, `{"group_by":null,"show_confidence":false}`, string(b))
}

// Encode splices the results into what encoding/json writes for the rest;
// the bytes must be Marshal's, whatever the envelope holds.
func TestEncodeWritesWhatMarshalWrites(t *testing.T) {
	msg, cur, sugg := "some <results> & \"more\"", "eyJvIjoxMH0.x", `try "results":null,`
	tricky := `,"results":null,`
	envs := []*envelope.Envelope{
		{Metadata: envelope.Metadata{Operation: "op", Status: envelope.StatusSuccess}, Results: []envelope.Object{}, Warnings: []envelope.Warning{}},
		{Metadata: envelope.Metadata{Operation: "op"}}, // nil results and warnings: null
		{
			Metadata: envelope.Metadata{Operation: tricky, Version: envelope.Version, RequestID: "req_1", Status: envelope.StatusPartial,
				Message: &msg, VisualHints: &envelope.VisualHints{HighlightTop: 5}},
			Results: []envelope.Object{
				{{Key: "chunk_id", Value: int64(7)}, {Key: "results", Value: nil}, {Key: "text", Value: envelope.Text{S: tricky + "\n<b>\u2028"}},
					{Key: "score", Value: 0.25}, {Key: "nested", Value: envelope.Object{{Key: "ids", Value: []int64{1, 2}}}}},
				{{Key: "chunk_id", Value: int64(8)}, {Key: "map", Value: map[string]any{"a": []any{1.5, "x"}}}},
			},
			Pagination:       &envelope.Pagination{Cursor: &cur, PageSize: 2, HasMore: true, TotalAvailable: 9, ReturnedCount: 2},
			ExecutionContext: envelope.ExecutionContext{TokensEstimated: 120, RequestID: "req_1", TokenBreakdown: &envelope.TokenBreakdown{Results: 100}},
			Warnings:         []envelope.Warning{{Level: envelope.LevelWarning, Code: "PARTIAL_RESULTS", Message: tricky, Suggestion: &sugg}},
			QueryAnalysis:    &envelope.QueryAnalysis{UnmatchedTerms: []string{"results"}},
		},
	}
	for i, env := range envs {
		want, err := envelope.Marshal(env)
		require.NoError(t, err)
		got, err := envelope.Encode(env)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "envelope %d", i)
	}

	// A number JSON cannot hold fails the encoding, as with encoding/json.
	bad := *envs[0]
	bad.Results = []envelope.Object{{{Key: "score", Value: math.NaN()}}}
	_, err := envelope.Encode(&bad)
	require.Error(t, err)
	_, err = envelope.Marshal(&bad)
	require.Error(t, err)
}
