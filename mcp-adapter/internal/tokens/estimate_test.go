package tokens_test

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
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

// CountLines is Count, whatever the text: cutting after line breaks that a
// non-space character follows never splits a cl100k piece. Random texts
// over the characters where pieces meet (line breaks, spaces, tabs,
// apostrophes, digits, punctuation, letters, non-ASCII) probe every
// boundary; the documents and a markdown answer are real texts.
func TestCountLinesIsCount(t *testing.T) {
	alphabet := []string{"\n", "\r", " ", "  ", "\t", "\u00a0", "'s", "'", "a", "Ab", "7", "123456", "-", "**", "·", ".", "#", "é", "東", "\x85", "\v", "\f", "😀", string([]byte{0xff})}
	rng := rand.New(rand.NewPCG(3, 5))
	texts := []string{"", "\n", "a\n", "\nb", "x \n-y", "a\n  \nb", "---\n\n1. **x**\n"}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for j := rng.IntN(24); j >= 0; j-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, d := range testfake.Documents() {
		texts = append(texts, d.Text, mustJSON(d.Text))
	}
	for _, text := range texts {
		require.Equal(t, tokens.Count(text), tokens.CountLines(text), "%q", text)
		require.Equal(t, tokens.Count(text), tokens.CountLines(text), "%q, memoised", text)
	}
}

// BenchmarkCountLines compares Count with CountLines on a markdown answer
// of 10 results: "repeat" counts the same answer again (every line
// memoised), "fresh" an answer whose every line is new (every line counted
// and stored).
func BenchmarkCountLines(b *testing.B) {
	var page strings.Builder
	for i := 1; i <= 10; i++ {
		page.WriteString("1. **security/incident-response-runbook.md** · id 162 · part 2/22 · score 0.534 · security\n")
		page.WriteString("   Confidence 0.71 · Moderate: semantic #4, keyword #3; matched incident, severity\n")
	}
	page.WriteString("\nNext page: call `semantic_search` again with the same query and cursor `eyJxIjoiYjZiZTYzZjEiLCJvIjoxMH0.9abqfhcZ` (122 more results).\n")
	text := page.String()
	_ = tokens.Count(text)
	b.Run("count", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			tokens.Count(text)
		}
	})
	b.Run("repeat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			tokens.CountLines(text)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		lines := strings.SplitAfter(text, "\n")
		for i := 0; i < b.N; i++ {
			var fresh strings.Builder
			for _, l := range lines {
				fresh.WriteString(strconv.Itoa(i))
				fresh.WriteString(l)
			}
			tokens.CountLines(fresh.String())
		}
	})
}
