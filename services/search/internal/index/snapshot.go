package index

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/binfmt"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
)

// Frozen is a consistent view of the index at one generation, to be
// written out (package snapshot) while the index keeps serving and
// changing: records are immutable once published, so the view only holds
// pointers to them; the BM25 part is a bm25.Frozen. Release it when done.
type Frozen struct {
	bm         *bm25.Frozen
	docs       []*Document
	chunks     []*Chunk
	Generation int64
	LastChange time.Time
}

// Freeze takes the view. The caller must keep the index's writer (the
// follower) out while it runs, as a load adds chunks outside the record
// lock; its cost is one pass over the record maps plus bm25.Freeze.
func (ix *Index) Freeze() *Frozen {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	f := &Frozen{bm: ix.bm.Freeze(), Generation: ix.generation, LastChange: ix.lastChange,
		docs: make([]*Document, 0, len(ix.docs)), chunks: make([]*Chunk, 0, len(ix.chunks))}
	for _, d := range ix.docs {
		f.docs = append(f.docs, d)
	}
	for _, c := range ix.chunks {
		f.chunks = append(f.chunks, c)
	}
	return f
}

// Release ends the view.
func (f *Frozen) Release() { f.bm.Release() }

// Documents and Chunks count the view's records.
func (f *Frozen) Documents() int { return len(f.docs) }

// Chunks counts the view's chunk records.
func (f *Frozen) Chunks() int { return len(f.chunks) }

// Encode writes the BM25 part, then every document (by id) with its chunk
// records (in its row order), without text.
func (f *Frozen) Encode(w *binfmt.Writer) {
	f.bm.Encode(w)
	slices.SortFunc(f.docs, func(a, b *Document) int { return cmpInt(a.ID, b.ID) })
	slices.SortFunc(f.chunks, func(a, b *Chunk) int {
		if a.Doc.ID != b.Doc.ID {
			return cmpInt(a.Doc.ID, b.Doc.ID)
		}
		return cmpInt(int64(a.ChunkIndex), int64(b.ChunkIndex))
	})
	w.Uvarint(uint64(len(f.docs)))
	prevDoc, prevChunk, next := int64(0), int64(0), 0
	var hash [8]byte
	for _, d := range f.docs {
		w.Varint(d.ID - prevDoc)
		prevDoc = d.ID
		w.String(d.ExternalID)
		w.String(d.SourceFile)
		w.String(d.Category)
		w.String(d.Title)
		w.Varint(d.UpdatedAt.Unix())
		w.Uvarint(uint64(d.UpdatedAt.Nanosecond()))
		w.Varint(d.Generation)
		w.Uvarint(uint64(len(d.Access)))
		for _, p := range d.Access {
			w.String(p)
		}
		w.Uvarint(uint64(len(d.Chunks)))
		for _, id := range d.Chunks {
			if next >= len(f.chunks) || f.chunks[next].ChunkID != id || f.chunks[next].Doc != d {
				w.Fail(fmt.Errorf("encode index: chunk %d of document %d has no record in order", id, d.ID))
				return
			}
			c := f.chunks[next]
			next++
			w.Varint(c.ChunkID - prevChunk)
			prevChunk = c.ChunkID
			w.Varint(int64(c.ChunkIndex))
			w.Varint(int64(c.TotalChunks))
			w.Varint(int64(c.ChunkTokenCount))
			w.Varint(int64(c.Page))
			binary.BigEndian.PutUint64(hash[:], c.Hash)
			w.Raw(hash[:])
		}
	}
	if next != len(f.chunks) {
		w.Fail(fmt.Errorf("encode index: %d chunk records belong to no document", len(f.chunks)-next))
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Decode reads what Frozen.Encode wrote into a new index (generation 0:
// the caller sets the position the snapshot represents). Every chunk
// record starts with TextInDatabase set, so a chunk whose text is never
// filled (FillText) is read from PostgreSQL when shown, never shown empty.
// It checks that the records and the BM25 part describe the same chunks.
func Decode(r *binfmt.Reader, an *analysis.Analyzer, p bm25.Params, o Options) (*Index, error) {
	bm := bm25.Decode(r, p)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("decode bm25 index: %w", err)
	}
	ix := NewWithOptions(an, p, o)
	ix.bm = bm
	ndocs := r.Count("documents", uint64(bm.Len())+1<<24)
	prevDoc, prevChunk := int64(0), int64(0)
	var hash [8]byte
	for i := 0; i < ndocs && r.Err() == nil; i++ {
		d := &Document{}
		d.ID = prevDoc + r.Varint()
		prevDoc = d.ID
		d.ExternalID, d.SourceFile, d.Category, d.Title = r.String(), r.String(), r.String(), r.String()
		sec, nsec := r.Varint(), r.Uvarint()
		if nsec >= uint64(time.Second) {
			r.Failf("document %d: bad time", d.ID)
			break
		}
		d.UpdatedAt = time.Unix(sec, int64(nsec))
		d.Generation = r.Varint()
		if na := r.Count("access list entries", access.MaxEntries); na > 0 {
			d.Access = make([]string, na)
			for k := range d.Access {
				d.Access[k] = r.String()
			}
		}
		nch := r.Count("chunks of a document", uint64(bm.Len()))
		if _, dup := ix.docs[d.ID]; dup && r.Err() == nil {
			r.Failf("document %d twice", d.ID)
			break
		}
		d.Chunks = make([]int64, 0, nch)
		for j := 0; j < nch && r.Err() == nil; j++ {
			c := &Chunk{Doc: d, TextInDatabase: true}
			c.ChunkID = prevChunk + r.Varint()
			prevChunk = c.ChunkID
			c.ChunkIndex, c.TotalChunks, c.ChunkTokenCount, c.Page = int32(r.Varint()), int32(r.Varint()), int32(r.Varint()), int32(r.Varint())
			r.Raw(hash[:])
			c.Hash = binary.BigEndian.Uint64(hash[:])
			if _, dup := ix.chunks[c.ChunkID]; dup || !bm.Contains(c.ChunkID) {
				r.Failf("chunk %d: twice, or not in the bm25 index", c.ChunkID)
				break
			}
			d.Chunks = append(d.Chunks, c.ChunkID)
			ix.chunks[c.ChunkID] = c
			ix.countChunksLocked(d, 1)
		}
		ix.docs[d.ID] = d
		ix.incCat(d.Category)
		if len(d.Access) > 0 {
			ix.restricted++
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("decode index records: %w", err)
	}
	if len(ix.chunks) != bm.Len() {
		return nil, fmt.Errorf("decode index records: %w: %d chunk records, %d chunks in the bm25 index", binfmt.ErrCorrupt, len(ix.chunks), bm.Len())
	}
	return ix, nil
}

// FillText gives a decoded chunk its text (the index is not serving yet:
// records are immutable once published). It reports whether the chunk is
// in the index; with Options.TextInDatabase it keeps nothing.
func (ix *Index) FillText(id int64, header, text string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	c := ix.chunks[id]
	if c == nil || ix.opt.TextInDatabase {
		return c != nil
	}
	if !c.TextInDatabase {
		ix.textBytes -= int64(len(c.ContextHeader) + len(c.ChunkText))
	}
	c.ContextHeader, c.ChunkText, c.TextInDatabase = header, text, false
	ix.textBytes += int64(len(header) + len(text))
	return true
}

// Trim gives back the spare capacity appends left in the posting lists
// (bm25.Index.Trim): after a catch-up on top of a snapshot, whose lists
// were exactly sized, the first append to each list grows it by a quarter
// or more (about 150 MB at a million chunks after 5,000 new chunks).
func (ix *Index) Trim() { ix.bm.Trim() }
