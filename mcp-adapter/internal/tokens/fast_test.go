package tokens_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// Count must agree with tiktoken-go exactly.
func TestCountMatchesTiktoken(t *testing.T) {
	var samples []string
	for _, d := range testfake.Documents() {
		samples = append(samples, d.Text)
		j, _ := json.Marshal(d.Text)
		samples = append(samples, string(j))
	}
	samples = append(samples,
		"", " ", "  ", "\n", " \n ", "a  b", "a \t b", "x\r\ny", "it's they're I'LL we've he'd I'm 'sorry",
		"<|endoftext|> special", "1234567 12 1 0.8751", "naïve café — déjà vu, 東京は晴れ。 Привет мир",
		"e\u0301 combining", "tab\tseparated\tvalues", "   leading", "trailing   ", "a\n\n\n   b",
		`{"_metadata":{"status":"success"},"results":[{"chunk_id":1,"hybrid_score":0.5}]}`,
		"emoji 😀🎉 and symbols ©®™ ±×÷", "\u00a0nbsp\u2003em\u3000ideographic", "\u0085next line",
		string([]byte{0xff, 'a', 0xfe, 0xfd, ' ', 'b'}),
	)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcXYZ019 '\t\n\r.,:;\"{}[]()_-/\\é東😀\u00a0\u0301\u2028")
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for j := rng.IntN(40); j >= 0; j-- {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		samples = append(samples, b.String())
	}
	for _, s := range samples {
		require.Equal(t, tokens.CountReference(s), tokens.Count(s), "%q", s)
	}
}

func BenchmarkCount(b *testing.B) {
	doc := testfake.Documents()[0].Text
	j, _ := json.Marshal(strings.Repeat(doc, 2))
	s := string(j)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for i := 0; i < b.N; i++ {
			tokens.Count(s)
		}
	})
	b.Run("tiktoken", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for i := 0; i < b.N; i++ {
			tokens.CountReference(s)
		}
	})
}
