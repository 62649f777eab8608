package docformat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func TestLookups(t *testing.T) {
	f, ok := ForPath(`docs\Guide.MD`)
	require.True(t, ok)
	require.Equal(t, "markdown", f.Name)
	require.True(t, f.FrontMatter)
	f, ok = ForMediaType("application/x-ndjson; charset=utf-8")
	require.True(t, ok)
	require.True(t, f.Container())
	_, ok = ForPath("image.png")
	require.False(t, ok)
	require.Equal(t, []string{"docx", "html", "markdown", "pdf", "text"}, Names())
	require.Contains(t, Extensions(), ".jsonl")

	f, err := ForDocument(&searchv1.Document{})
	require.NoError(t, err)
	require.Equal(t, "markdown", f.Name, "unspecified is markdown")
	_, err = ForDocument(&searchv1.Document{FormatName: "jsonl"})
	require.ErrorContains(t, err, `unknown format "jsonl" (known: docx, html, markdown, pdf, text)`)
}

func TestJSONLRecords(t *testing.T) {
	jsonl, _ := ByName("jsonl")
	in := `{"_id": "d1", "title": "One", "text": "First.", "updated_at": "2025-01-02"}
{"id": 7, "text": "Second."}
not json
`
	var got []Record
	require.NoError(t, jsonl.Records(strings.NewReader(in), "corpus.jsonl", func(r Record) error {
		got = append(got, r)
		return nil
	}))
	require.Len(t, got, 3)
	require.Equal(t, "d1", got[0].Doc.GetExternalId())
	require.Equal(t, "One", got[0].Doc.GetTitle())
	require.Equal(t, "7", got[1].Doc.GetExternalId())
	require.Nil(t, got[2].Doc)
	require.NotEmpty(t, got[2].Problem)
	require.Equal(t, "corpus.jsonl:3", got[2].Where)
}

func TestFirstHeading(t *testing.T) {
	require.Equal(t, "Setup", FirstHeading("```\n# not this\n```\n\n## Setup ##\n\n# Later\n"))
	require.Empty(t, FirstHeading("#hashtag only\n"))
}
