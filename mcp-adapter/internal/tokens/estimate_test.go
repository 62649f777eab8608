package tokens_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// The estimator stays within 10 % of the real count on whole documents and
// their JSON encodings.
func TestEstimateTextAccuracy(t *testing.T) {
	for _, d := range testfake.Documents() {
		for _, text := range []string{d.Text, mustJSON(d.Text)} {
			real := tokens.Count(text)
			est := tokens.EstimateText(text)
			require.InDelta(t, real, est, 0.1*float64(real), "%s: estimate %d, real %d", d.Name, est, real)
		}
	}
}

func TestSinkJSONStringMatchesEncodedText(t *testing.T) {
	for _, d := range testfake.Documents() {
		var sink tokens.Sink
		sink.JSONString(d.Text)
		require.Equal(t, tokens.EstimateText(mustJSON(d.Text)), sink.Total(), d.Name)
	}
}

func TestKnownJSONString(t *testing.T) {
	for _, d := range testfake.Documents() {
		real := tokens.Count(mustJSON(d.Text))
		est := tokens.KnownJSONString(d.Text, tokens.Count(d.Text))
		require.InDelta(t, real, est, 0.1*float64(real), d.Name)
	}
}

func TestSinkKnown(t *testing.T) {
	var sink tokens.Sink
	sink.Raw("hello")
	sink.Known(10)
	sink.Raw(" world")
	require.Equal(t, 12, sink.Total())
	require.Equal(t, 0, sink.Total(), "Total resets the sink")
}

func TestEstimateOpaque(t *testing.T) {
	s := strings.Repeat("eyJxdWVyeV9oYXNoIjoiYjZi", 5)
	require.InDelta(t, tokens.Count(s), tokens.EstimateOpaque(s), 0.2*float64(tokens.Count(s)))
}

func TestCountBasics(t *testing.T) {
	require.Equal(t, 0, tokens.Count(""))
	require.Equal(t, 2, tokens.Count("hello world"))
	require.NoError(t, tokens.Init())
}

// mustJSON encodes s as the envelope does: no HTML escaping.
func mustJSON(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
