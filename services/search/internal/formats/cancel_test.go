package formats

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ctxtest"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// repeated is the handbook's pages n times over.
func repeated(n int) sample.Doc {
	d := sample.Doc{Title: sample.Handbook.Title}
	for range n {
		d.Pages = append(d.Pages, sample.Handbook.Pages...)
	}
	return d
}

// TestExtractStopsWhenCancelled: every format stops reading a large
// document at the first check that sees its caller gone, and answers the
// context's error, not a refusal. Work is counted, not timed: the checks
// made (ctxtest.CancelAfter) and the bytes the Input handed out, at most
// checkBytes per check that let the work go on.
func TestExtractStopsWhenCancelled(t *testing.T) {
	require.NoError(t, WarmPDF())
	big := repeated(600) // 1800 pages, about 2 MB of words
	text := strings.Repeat(big.Text()+"\n", 2)
	latin1 := []byte(strings.Replace(string(sample.HTML(big)), "<body>", "<body><p>caf\xe9</p>", 1))
	require.False(t, utf8.Valid(latin1))
	cases := []struct {
		name, format string
		data         []byte
	}{
		{"text", "text", []byte(text)},
		{"markdown", "markdown", []byte("# Handbook\n\n" + text)},
		{"html", "html", sample.HTML(big)},
		{"html in latin-1", "html", latin1},
		{"docx", "docx", sample.DOCX(big)},
		{"pdf", "pdf", sample.PDF(repeated(10))}, // 30 pages
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := ByName(tc.format)
			require.True(t, ok)
			want, err := f.Extract(t.Context(), tc.data, "big."+tc.format)
			require.NoError(t, err)

			// Uncancelled, the checks change nothing; count them.
			all := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: 1 << 62}
			got, in, err := f.extractInput(all, tc.data, "big."+tc.format)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Greater(t, all.Checks, 10, "a large document is checked as it is read")
			require.Equal(t, all.Checks, in.checks)

			for _, at := range []int{0, 1, 2, all.Checks / 2, all.Checks - 1} {
				ctx := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: at}
				ex, in, err := f.extractInput(ctx, tc.data, "big."+tc.format)
				require.ErrorIs(t, err, context.Canceled, "cancelled after %d checks", at)
				require.Equal(t, context.Canceled, err, "the context's error itself, not a refusal that wraps it")
				require.Zero(t, ex)
				require.Equal(t, at+1, ctx.Checks, "the first check that sees the cancellation ends the extraction")
				require.LessOrEqual(t, in.read, at*checkBytes, "nothing is read past the cancellation")
			}
		})
	}
}

// TestTextPiecesKeepAnswers: validating in pieces finds the same first
// invalid byte as validating whole, wherever it sits against a piece's end.
func TestTextPiecesKeepAnswers(t *testing.T) {
	body := strings.Repeat("é", checkBytes) // 2 bytes a rune: pieces end mid-rune unless cut
	for _, at := range []int{0, 1, checkBytes - 1, checkBytes, checkBytes + 1, 2*checkBytes - 3, len(body) - 1} {
		data := []byte(body)
		data[at] = 0xff
		_, err := background(data, "a.txt").Text()
		require.EqualError(t, err, "invalid UTF-8 at byte "+strconv.Itoa(invalidAt(data)), "invalid byte at %d", at)
	}
	got, err := background([]byte(body), "a.txt").Text()
	require.NoError(t, err)
	require.Equal(t, body, got)
}
