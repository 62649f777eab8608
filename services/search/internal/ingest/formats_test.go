package ingest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// Structure survives into the chunks: PDF pages and headings in the
// context header, DOCX and HTML headings as the heading path.
func TestPrepareKeepsStructure(t *testing.T) {
	def, err := chunker.NewDefault()
	require.NoError(t, err)
	// Small chunks, so every section gets its own.
	ck, err := chunker.New(def.Tokenizer(), chunker.Options{TargetTokens: 64, OverlapTokens: 8})
	require.NoError(t, err)
	tests := []struct {
		format  string
		data    []byte
		headers []string // each must head some chunk
		absent  []string // no header may contain these
	}{
		{"pdf", sample.PDF(sample.Handbook), []string{
			"Employee Handbook > p. 1 > Welcome > Working hours",
			"Employee Handbook > p. 2 > Equipment", // the section runs on over the page break
			"Employee Handbook > p. 2 > Expenses > Per diem",
			"Employee Handbook > p. 3 > Security > Passwords",
		}, nil},
		{"docx", sample.DOCX(sample.Handbook), []string{
			"Employee Handbook > Welcome > Working hours",
			"Employee Handbook > Expenses > Per diem",
			"Employee Handbook > Security > Passwords",
		}, []string{"p. "}},
		{"html", sample.HTML(sample.Handbook), []string{
			"Employee Handbook > Welcome > Working hours",
			"Employee Handbook > Security > Passwords",
		}, []string{"p. "}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			row, fail, err := Prepare(t.Context(), ck, &searchv1.Document{SourceFile: "hr/handbook." + tc.format, Content: tc.data, FormatName: tc.format}, Limits{MaxBytes: 1 << 20})
			require.NoError(t, err)
			require.Nil(t, fail)
			require.Equal(t, "Employee Handbook", row.Title, "the file's own title")
			var got []string
			for _, c := range row.Chunks {
				got = append(got, c.ContextHeader)
				require.NotContains(t, c.ChunkText, "\f", "a chunk never spans a page break")
				for _, a := range tc.absent {
					require.NotContains(t, c.ContextHeader, a)
				}
			}
			for _, h := range tc.headers {
				require.Contains(t, got, h)
			}
		})
	}

	t.Run("a bad file is this document's failure", func(t *testing.T) {
		_, fail, err := Prepare(t.Context(), ck, &searchv1.Document{SourceFile: "hr/broken.pdf", Content: []byte("%PDF-1.7\nnothing else"), FormatName: "pdf"}, Limits{})
		require.NoError(t, err)
		require.NotNil(t, fail)
		require.Equal(t, "hr/broken.pdf", fail.SourceFile)
		require.True(t, strings.HasPrefix(fail.Reason, "corrupt PDF"), fail.Reason)
		_, fail, err = Prepare(t.Context(), ck, &searchv1.Document{SourceFile: "x.bin", Content: []byte("data"), FormatName: "rtf"}, Limits{})
		require.NoError(t, err)
		require.NotNil(t, fail)
		require.Contains(t, fail.Reason, `unknown format "rtf"`)
	})
}
