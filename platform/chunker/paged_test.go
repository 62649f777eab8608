package chunker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPagedMarkdown(t *testing.T) {
	c := newTestChunker(t, DefaultOptions())
	src := "# Guide\n\n## Setup\n\nInstall the agent.\n\n\f\n\nThen restart it.\n\n## Use\n\nRun a scan.\n\n\f\n\n\f\n\nLast page text.\n"
	chunks, err := c.Split(t.Context(), PagedMarkdown, "Handbook.pdf", src)
	require.NoError(t, err)
	type got struct {
		header string
		page   int
		text   string
	}
	var out []got
	for _, ch := range chunks {
		out = append(out, got{ch.ContextHeader, ch.Page, ch.ChunkText})
	}
	require.Equal(t, []got{
		{"Handbook.pdf > p. 1 > Guide", 1, "# Guide\n\n## Setup\n\nInstall the agent."},
		{"Handbook.pdf > p. 2 > Guide > Setup", 2, "Then restart it."}, // the section runs on
		{"Handbook.pdf > p. 2 > Guide > Use", 2, "## Use\n\nRun a scan."},
		{"Handbook.pdf > p. 4 > Guide > Use", 4, "Last page text."}, // page 3 is empty
	}, out)

	t.Run("markdown knows no pages", func(t *testing.T) {
		chunks, err := c.Split(t.Context(), Markdown, "Guide", "# Guide\n\nText.\n\n\f\n\nMore.\n")
		require.NoError(t, err)
		require.Len(t, chunks, 1)
		require.Zero(t, chunks[0].Page)
		require.Equal(t, "Guide", chunks[0].ContextHeader)
	})
}
