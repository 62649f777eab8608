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
	ex, err := f.Extract(ctx, content, src)
	if isCallEnded(err) {
		return nil, nil, err
	}
	if err != nil {
		return fail("%v", err)
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
	text, err := normalize(ctx, []byte(ex.Text))
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(text) == "" {
		return fail("empty document")
	}
	chunks, err := ck.Split(ctx, format, title, text)
	if isCallEnded(err) {
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

// isCallEnded reports an error that is the context's end (the call's
// deadline or cancellation), the call's error rather than the document's.
func isCallEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Normalize makes content canonical: byte-order mark dropped, CRLF and CR
// line ends turned into LF, Unicode NFC.
func Normalize(b []byte) string {
	s, _ := normalize(context.Background(), b) // Background never ends: no error
	return s
}

// normalizePiece is how much text is put in NFC between two checks of
// the context.
const normalizePiece = 256 << 10

// normalize is Normalize checking ctx between pieces of normalizePiece
// bytes, cut at NFC boundaries (norm.Form.LastBoundary), where normalizing
// the pieces apart gives the same text as normalizing them together.
func normalize(ctx context.Context, b []byte) (string, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if bytes.IndexByte(b, '\r') >= 0 {
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		b = bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(b) <= normalizePiece {
		return norm.NFC.String(string(b)), nil
	}
	out := make([]byte, 0, len(b)+len(b)/16)
	for len(b) > 0 {
		piece := b
		if len(b) > normalizePiece {
			// No boundary in the piece (a base with 256 KiB of combining
			// marks): normalize the rest whole.
			if cut := norm.NFC.LastBoundary(b[:normalizePiece]); cut > 0 {
				piece = b[:cut]
			}
		}
		out = norm.NFC.Append(out, piece...)
		b = b[len(piece):]
		if len(b) > 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
	}
	return string(out), nil
}
