package ingest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/ctxtest"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

func TestPrepare(t *testing.T) {
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	base := func() *searchv1.Document {
		return &searchv1.Document{ExternalId: "a.md", SourceFile: "a.md", Category: "ops", Title: "Guide",
			Content: []byte("\xef\xbb\xbf# Guide\r\n\r\n## Setup\r\n\r\nInstall it.\r\n"), UpdatedAt: timestamppb.New(time.Unix(1700000000, 0))}
	}
	row, fail, err := Prepare(t.Context(), ck, base(), Limits{MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Nil(t, fail)
	require.Equal(t, "a.md", row.ExternalID)
	require.Len(t, row.Chunks, 1)
	require.NotContains(t, row.Chunks[0].ChunkText, "\r")
	require.False(t, strings.HasPrefix(row.Chunks[0].ChunkText, "\xef\xbb\xbf"))
	require.Len(t, row.ContentHash, 32)

	// CRLF vs LF and a BOM do not change the hash; visible metadata does.
	lf := base()
	lf.Content = []byte("# Guide\n\n## Setup\n\nInstall it.\n")
	row2, _, err := Prepare(t.Context(), ck, lf, Limits{})
	require.NoError(t, err)
	require.Equal(t, row.ContentHash, row2.ContentHash)
	for name, mut := range map[string]func(d *searchv1.Document){
		"title":      func(d *searchv1.Document) { d.Title = "Guide 2" },
		"category":   func(d *searchv1.Document) { d.Category = "dev" },
		"source":     func(d *searchv1.Document) { d.SourceFile = "b.md" },
		"updated_at": func(d *searchv1.Document) { d.UpdatedAt = timestamppb.New(time.Unix(1700000001, 0)) },
		"content":    func(d *searchv1.Document) { d.Content = append(d.Content, 'x') },
		"format":     func(d *searchv1.Document) { d.Format = searchv1.ContentFormat_CONTENT_FORMAT_TEXT },
	} {
		d := base()
		mut(d)
		r, f, err := Prepare(t.Context(), ck, d, Limits{})
		require.NoError(t, err, name)
		require.Nil(t, f, name)
		require.NotEqual(t, row.ContentHash, r.ContentHash, name)
	}
	// The external id falls back to the source file.
	d := base()
	d.ExternalId = ""
	r, f, err := Prepare(t.Context(), ck, d, Limits{})
	require.NoError(t, err)
	require.Nil(t, f)
	require.Equal(t, "a.md", r.ExternalID)
}

func TestPrepareRejects(t *testing.T) {
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	cases := map[string]struct {
		doc    *searchv1.Document
		reason string
	}{
		"empty":       {&searchv1.Document{ExternalId: "e", Content: []byte(" \n\t ")}, "empty document"},
		"nul":         {&searchv1.Document{ExternalId: "b", Content: []byte("ab\x00cd")}, "binary"},
		"controls":    {&searchv1.Document{ExternalId: "c", Content: bytes.Repeat([]byte{1, 2, 3, 'a'}, 100)}, "binary"},
		"utf8":        {&searchv1.Document{ExternalId: "u", Content: []byte("ok \xff bad")}, "invalid UTF-8 at byte 3"},
		"size":        {&searchv1.Document{ExternalId: "s", Content: bytes.Repeat([]byte("a "), 600)}, "too large: 1200 bytes (limit 1000)"},
		"no id":       {&searchv1.Document{Content: []byte("text")}, "missing external_id"},
		"control id":  {&searchv1.Document{ExternalId: "a\tb", Content: []byte("text")}, "external_id must not contain control characters"},
		"c1 id":       {&searchv1.Document{ExternalId: "a\u0085b", Content: []byte("text")}, "external_id must not contain control characters"},
		"long title":  {&searchv1.Document{ExternalId: "t", Title: strings.Repeat("t", 1001), Content: []byte("x")}, "title longer"},
		"format":      {&searchv1.Document{ExternalId: "f", Format: 9, Content: []byte("x")}, "unknown content format"},
		"only markup": {&searchv1.Document{ExternalId: "m", Content: []byte("\xef\xbb\xbf\r\n")}, "empty document"},
	}
	for name, c := range cases {
		_, f, err := Prepare(t.Context(), ck, c.doc, Limits{MaxBytes: 1000})
		require.NoError(t, err, name)
		require.NotNil(t, f, name)
		require.Contains(t, f.Reason, c.reason, name)
		require.Equal(t, c.doc.ExternalId, f.ExternalID, name)
	}
}

// TestPrepareStopsWhenCancelled: a large document whose caller is gone is
// not prepared to the end, in extraction, normalization or chunking:
// Prepare returns the context's error (not a failure of the document) at
// the first check after the cancellation.
func TestPrepareStopsWhenCancelled(t *testing.T) {
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	var content strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&content, "## Section %d\n\nThe quick brown fox %d jumps over the lazy dog.\n\n", i, i)
	}
	var page sample.Doc
	for range 100 {
		page.Pages = append(page.Pages, sample.Handbook.Pages...)
	}
	cases := []struct {
		name string
		doc  *searchv1.Document
	}{
		{"markdown", &searchv1.Document{ExternalId: "big.md", Content: []byte(content.String())}},
		{"html", &searchv1.Document{ExternalId: "big.html", FormatName: "html", Content: sample.HTML(page)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: 1 << 62}
			row, fail, err := Prepare(all, ck, tc.doc, Limits{})
			require.NoError(t, err)
			require.Nil(t, fail)
			require.Greater(t, len(row.Chunks), 100)
			for _, at := range []int{0, 1, 2, all.Checks / 4, all.Checks / 2, all.Checks - 1} {
				ctx := &ctxtest.CancelAfter{Context: t.Context(), CancelAt: at}
				row, fail, err := Prepare(ctx, ck, tc.doc, Limits{})
				require.ErrorIs(t, err, context.Canceled, "cancelled after %d checks", at)
				require.Nil(t, fail, "a cancellation is not the document's failure")
				require.Nil(t, row)
				require.Equal(t, at+1, ctx.Checks, "the first check that sees the cancellation ends the preparation")
			}
		})
	}
}

// TestNormalizeInPiecesIsNFC: normalizing in pieces (checking the context
// between them) gives the text NFC gives whole, with pieces cut among
// combining marks, Hangul jamo and runs of marks longer than a piece.
func TestNormalizeInPiecesIsNFC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"e\u0301", "a\u0323\u0302", "\u1100\u1161\u11a8", "\u0301", "x", " ", "\r\n", "\r", "\n", "Å", "\u212b", "ﬁ", "日本"}
	var b strings.Builder
	for b.Len() < 3*normalizePiece {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	long := "o" + strings.Repeat("\u0308\u0301", normalizePiece/3) + "end"
	for name, text := range map[string]string{
		"mixed":              b.String(),
		"marks past a piece": strings.Repeat("x", normalizePiece-10) + long + b.String(),
		"ascii":              strings.Repeat("plain words\n", normalizePiece/4),
	} {
		crlf := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
		want := norm.NFC.String(crlf)
		got, err := normalize(t.Context(), []byte(text))
		require.NoError(t, err, name)
		require.True(t, want == got, "%s: pieces normalize as the whole does", name)
		require.Equal(t, want, Normalize([]byte(text)), name)
	}
}
