// Package ingest turns an incoming document into the rows the store
// writes: validation (a bad document becomes a Failure with a reason, never
// an RPC error), normalization, content hashing and chunking.
package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/docid"
	"github.com/bmcis/knowledge/services/search/internal/formats"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Limits bound what one document may be.
type Limits struct {
	// MaxBytes is the largest content accepted.
	MaxBytes int
}

// Field length limits.
const (
	maxExternalID = docid.MaxBytes
	maxTitle      = 1000
	maxCategory   = 200
	maxSourceFile = 4096
)

// Failure is a rejected document.
type Failure struct {
	ExternalID string
	SourceFile string
	Reason     string
}

// Prepare validates, normalizes, hashes and chunks a document. A bad
// document is a Failure; a cancelled ctx (the caller is gone: nothing will
// be written) ends the work between pieces with ctx.Err(), so a huge
// document does not hold a worker to the end.
func Prepare(ctx context.Context, ck *chunker.Chunker, d *searchv1.Document, lim Limits) (*store.DocumentRow, *Failure, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	src := strings.TrimSpace(d.GetSourceFile())
	id := strings.TrimSpace(d.GetExternalId())
	if id == "" {
		id = src
	}
	fail := func(format string, args ...any) (*store.DocumentRow, *Failure, error) {
		return nil, &Failure{ExternalID: id, SourceFile: src, Reason: fmt.Sprintf(format, args...)}, nil
	}
	content := d.GetContent()
	switch {
	case id == "":
		return fail("missing external_id (and no source_file to use instead)")
	case len(id) > maxExternalID:
		return fail("external_id longer than %d bytes", maxExternalID)
	case !utf8.ValidString(id) || !utf8.ValidString(src):
		return fail("external_id or source_file is not valid UTF-8")
	case docid.Check(id) != nil:
		// The rule of every place that names a document (audit --document,
		// documents show): an id it refuses, one with a control character,
		// would be stored but could never be looked up.
		return fail("external_id %v", docid.Check(id))
	case len(src) > maxSourceFile:
		return fail("source_file longer than %d bytes", maxSourceFile)
	case lim.MaxBytes > 0 && len(content) > lim.MaxBytes:
		return fail("too large: %d bytes (limit %d)", len(content), lim.MaxBytes)
	case len(bytes.TrimSpace(content)) == 0:
		return fail("empty document")
	}
	// The format registry says how these bytes become text: a refusal
	// (corrupt, encrypted, not what its name says) is this document's
	// failure, before anything is written.
	f, err := formats.ForDocument(d)
	if err != nil {
		return fail("%v", err)
	}
	ex, err := f.Extract(content, src)
	if err != nil {
		return fail("%v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	title := strings.Join(strings.Fields(d.GetTitle()), " ")
	if title == "" {
		title = strings.Join(strings.Fields(ex.Title), " ")
	}
	category := strings.TrimSpace(d.GetCategory())
	switch {
	case len(title) > maxTitle:
		return fail("title longer than %d bytes", maxTitle)
	case len(category) > maxCategory:
		return fail("category longer than %d bytes", maxCategory)
	}
	format := ex.Layout
	text := Normalize([]byte(ex.Text))
	if strings.TrimSpace(text) == "" {
		return fail("empty document")
	}
	chunks, err := ck.Split(ctx, format, title, text)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, nil, err
	}
	if err != nil {
		return fail("cannot chunk: %v", err)
	}
	if len(chunks) == 0 {
		return fail("no indexable text")
	}
	var updated time.Time
	if ts := d.GetUpdatedAt(); ts != nil && (ts.GetSeconds() != 0 || ts.GetNanos() != 0) {
		if err := ts.CheckValid(); err != nil {
			return fail("invalid updated_at: %v", err)
		}
		updated = ts.AsTime().UTC()
	}

	// The content hash covers everything a search result shows or filters
	// on, so a re-ingest is a no-op exactly when nothing visible changed.
	h := sha256.New()
	fmt.Fprintf(h, "bmcis-doc-v1\x00%d\x00%s\x00%s\x00%s\x00", format, title, category, src)
	if !updated.IsZero() {
		h.Write([]byte(updated.Format(time.RFC3339Nano)))
	}
	h.Write([]byte{0})
	h.Write([]byte(text))

	row := &store.DocumentRow{
		ExternalID: id, SourceFile: src, Category: category, Title: title,
		ContentHash: h.Sum(nil), UpdatedAt: updated,
		Chunks: make([]store.Chunk, len(chunks)),
	}
	for i, c := range chunks {
		sum := sha256.Sum256([]byte(c.ChunkText))
		row.Chunks[i] = store.Chunk{ChunkIndex: c.ChunkIndex, ContextHeader: c.ContextHeader, ChunkText: c.ChunkText, ChunkTokenCount: c.ChunkTokenCount, Hash: sum[:], Page: c.Page}
	}
	return row, nil, nil
}

// Normalize makes content canonical: byte-order mark dropped, CRLF and CR
// line ends turned into LF, Unicode NFC.
func Normalize(b []byte) string {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	s := string(b)
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return norm.NFC.String(s)
}
