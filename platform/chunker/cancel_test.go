package chunker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ctxtest"
)

func TestSplitStopsWhenCancelled(t *testing.T) {
	c := newTestChunker(t, DefaultOptions())
	var code strings.Builder
	code.WriteString("```go\n")
	for l := range 5000 {
		fmt.Fprintf(&code, "x%d := compute(%d, \"arg\")\n", l, l)
	}
	code.WriteString("```\n")
	cases := map[string]struct {
		format Format
		doc    string
	}{
		"many sections":       {Markdown, benchMarkdown()},
		"one long paragraph":  {PlainText, sentences("long", 3000)},
		"one long code block": {Markdown, code.String()},
		"pages":               {PagedMarkdown, strings.Repeat(sentences("page", 40)+"\n\f\n", 50)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := c.Split(t.Context(), tc.format, "T", tc.doc)
			require.NoError(t, err)
			// Uncancelled, the checks change nothing; count them.
			all := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: 1 << 62}
			got, err := c.Split(all, tc.format, "T", tc.doc)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Greater(t, all.Checks, 50, "a large document is checked between many pieces")
			for _, at := range []int{0, 1, all.Checks / 2, all.Checks - 1} {
				ctx := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: at}
				chunks, err := c.Split(ctx, tc.format, "T", tc.doc)
				require.ErrorIs(t, err, context.Canceled, "cancelled after %d checks", at)
				require.Nil(t, chunks)
				require.Equal(t, at+1, ctx.Checks, "the first check that sees the cancellation ends the split")
			}
		})
	}
}
