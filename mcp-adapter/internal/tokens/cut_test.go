package tokens_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// TestCut: counting a text in parts split at its cuts gives the count of
// the whole, on the JSON of the test corpus (every cut of it) and on
// random texts mixing the characters around a cut (letters, digits,
// punctuation, apostrophes, spaces, line breaks, non-ASCII).
func TestCut(t *testing.T) {
	require.NoError(t, tokens.Init())
	check := func(s []byte) int {
		cuts := 0
		for i := range s {
			if !tokens.Cut(s, i) {
				continue
			}
			cuts++
			require.Equal(t, tokens.Count(string(s)), tokens.Count(string(s[:i]))+tokens.Count(string(s[i:])), "%q | %q", s[:i], s[i:])
		}
		return cuts
	}
	corpus, err := json.Marshal(testfake.Corpus()[:5])
	require.NoError(t, err)
	require.Positive(t, check(corpus))

	alphabet := []string{"a", "Z", "é", "7", "0", ",", "\"", "{", "}", ":", "'", "s", "t", " ", "  ", "\n", "\r\n", ".", "-", "_", "ll", "ve"}
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := 0
	for range 3000 {
		var s []byte
		for range 2 + rng.IntN(14) {
			s = append(s, alphabet[rng.IntN(len(alphabet))]...)
		}
		cuts += check(s)
	}
	require.Greater(t, cuts, 500, "the random texts have cuts to check")

	for _, tc := range []struct {
		s   string
		i   int
		cut bool
	}{
		{`{"results":[]}`, 2, true},
		{`"},"execution_context":{`, 4, true},
		{`x"results`, 2, false}, // one punctuation character: `"results` is one piece
		{`,'s`, 2, false},       // an apostrophe: a contraction
		{`a,"1`, 3, false},      // not a letter
		{` "a`, 2, false},       // a space
		{`,"`, 2, false},        // the end
	} {
		require.Equal(t, tc.cut, tokens.Cut([]byte(tc.s), tc.i), tc.s)
	}
}
