// Package index is a search replica's in-memory view of the corpus: the
// BM25 inverted index plus every chunk's metadata and (unless
// Options.TextInDatabase) text, so ranking, paging and GetChunks need no
// database work. It is built from PostgreSQL
// at start and kept fresh from the change feed (store.ChangesSince).
//
// Chunk and Document values are immutable once published: a changed
// document gets new records, so a cached result list holding pointers to
// them stays consistent with itself.
package index

import (
	"encoding/binary"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Document is a document's metadata.
type Document struct {
	ID         int64
	ExternalID string
	SourceFile string
	Category   string
	Title      string
	UpdatedAt  time.Time
	Generation int64
	Chunks     []int64
	// Access is the document's access list, normalised (platform/access);
	// nil: everyone.
	Access []string
}

// classSep joins a category and an access list into the BM25 index's
// per-chunk class (bm25.Doc.Category): the class filter the posting walk
// already makes for categories then keeps out what a caller may not read,
// at no extra cost per posting. No category or principal holds the byte.
const classSep = "\x00"

// class is the BM25 class of a document's chunks.
func (d *Document) class() string {
	if len(d.Access) == 0 {
		return d.Category
	}
	return d.Category + classSep + access.Key(d.Access)
}

// splitClass undoes class.
func splitClass(c string) (category string, list []string) {
	category, key, ok := strings.Cut(c, classSep)
	if !ok {
		return c, nil
	}
	return category, strings.Split(key, "\n")
}

// Chunk is a replica's in-memory record of a chunk: searchv1.Chunk's
// fields (same names) with the document's shared through Doc, counts in
// 32 bits and the text optional (TextInDatabase), because a replica holds
// every chunk of the corpus. The server's chunkProto is the one place it
// becomes a searchv1.Chunk.
type Chunk struct {
	ChunkID         int64
	Doc             *Document
	ChunkIndex      int32
	TotalChunks     int32
	ChunkTokenCount int32
	ContextHeader   string
	ChunkText       string
	// Page is the 1-based page of a paged format (PDF), else 0.
	Page int32
	// TextInDatabase says ContextHeader and ChunkText were not kept in
	// memory (Options.TextInDatabase): whoever shows the chunk reads them
	// from PostgreSQL by ChunkID (chunk ids are never reused, so any copy stays valid).
	TextInDatabase bool
	// Hash is the first 8 bytes of the chunk's SHA-256 content hash, enough
	// to flag identical content in a result list.
	Hash uint64
}

// Index is safe for concurrent use: many searches, one applier.
type Index struct {
	an  *analysis.Analyzer
	bm  *bm25.Index
	opt Options

	mu        sync.RWMutex
	chunks    map[int64]*Chunk
	docs      map[int64]*Document
	cats      map[string]int // documents per category
	catChunks map[string]int // chunks per category
	// classes count the chunks of each category and access list (by
	// Document.class): what a caller's access set may read of a scope is
	// known without walking the documents (Readable).
	classes map[string]*chunkClass
	catFold map[string][]string
	// restricted counts documents with an access list: while there are
	// none, an access set changes no count (HasRestricted).
	restricted int
	generation int64
	lastChange time.Time
	textBytes  int64
}

// Options shape what the index keeps in memory.
type Options struct {
	// TextInDatabase leaves chunk text and headers in PostgreSQL: the
	// biggest part of the index (about 0.9 GB per million chunks) for one
	// primary-key read per shown page (see docs/SCALING.md).
	TextInDatabase bool
}

// New returns an empty index using analyzer an and BM25 parameters p.
func New(an *analysis.Analyzer, p bm25.Params) *Index { return NewWithOptions(an, p, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(an *analysis.Analyzer, p bm25.Params, o Options) *Index {
	return &Index{
		an: an, bm: bm25.New(p), opt: o,
		chunks: map[int64]*Chunk{}, docs: map[int64]*Document{}, cats: map[string]int{}, catChunks: map[string]int{},
		classes: map[string]*chunkClass{}, catFold: map[string][]string{},
	}
}

// TextInDatabase reports whether chunk text is left in PostgreSQL.
func (ix *Index) TextInDatabase() bool { return ix.opt.TextInDatabase }

// Analyzer returns the analyzer used at indexing and query time.
func (ix *Index) Analyzer() *analysis.Analyzer { return ix.an }

// Batch collects one consistent set of changes to apply.
type Batch struct {
	Generation int64
	LastChange time.Time
	Documents  []store.Document
	Chunks     []store.Chunk
	Deleted    []int64 // document ids
}

// Records turns stored rows into index records: one Document per document
// row, and one Chunk per chunk row of those documents (rows of other
// documents are skipped), each document listing its chunks in row order.
// It is the one place where a stored chunk becomes a record.
func Records(documents []store.Document, rows []store.Chunk) (map[int64]*Document, []*Chunk) {
	docs := make(map[int64]*Document, len(documents))
	for _, d := range documents {
		docs[d.ID] = &Document{ID: d.ID, ExternalID: d.ExternalID, SourceFile: d.SourceFile, Category: d.Category,
			Title: d.Title, UpdatedAt: d.UpdatedAt, Generation: d.Generation, Access: d.Access}
	}
	chunks := make([]*Chunk, 0, len(rows))
	for _, c := range rows {
		if r := record(docs[c.DocumentID], c); r != nil {
			chunks = append(chunks, r)
		}
	}
	return docs, chunks
}

// record makes the record of chunk row c of document d (nil without d)
// and lists it in d.Chunks.
func record(d *Document, c store.Chunk) *Chunk {
	if d == nil {
		return nil
	}
	var h uint64
	if len(c.Hash) >= 8 {
		h = binary.BigEndian.Uint64(c.Hash)
	}
	d.Chunks = append(d.Chunks, c.ChunkID)
	return &Chunk{ChunkID: c.ChunkID, Doc: d, ChunkIndex: int32(c.ChunkIndex), TotalChunks: int32(c.TotalChunks), ChunkTokenCount: int32(c.ChunkTokenCount),
		ContextHeader: c.ContextHeader, ChunkText: c.ChunkText, Page: int32(c.Page), Hash: h}
}

// Apply publishes a batch: documents in it replace their previous version
// (all of its chunks), deleted documents disappear. Text analysis runs in
// parallel before any lock is taken.
func (ix *Index) Apply(b *Batch) {
	if ix.Empty() && len(b.Deleted) == 0 && len(b.Chunks) > loadSlice {
		ld := ix.NewLoader()
		ld.Documents(b.Documents)
		for _, c := range b.Chunks {
			ld.Chunk(c)
		}
		ld.Finish(b.Generation, b.LastChange)
		return
	}
	docs, chunks := Records(b.Documents, b.Chunks)
	bdocs := ix.analyze(chunks)

	ix.mu.Lock()
	defer ix.mu.Unlock()
	var remove []int64
	drop := func(id int64) {
		old := ix.docs[id]
		if old == nil {
			return
		}
		remove = append(remove, old.Chunks...)
		for _, cid := range old.Chunks {
			if c := ix.chunks[cid]; c != nil {
				ix.textBytes -= int64(len(c.ChunkText) + len(c.ContextHeader))
				ix.countChunksLocked(c.Doc, -1)
				delete(ix.chunks, cid)
			}
		}
		ix.decCat(old.Category)
		if len(old.Access) > 0 {
			ix.restricted--
		}
		delete(ix.docs, id)
	}
	for _, id := range b.Deleted {
		drop(id)
	}
	for id := range docs {
		drop(id)
	}
	for id, d := range docs {
		ix.docs[id] = d
		ix.incCat(d.Category)
		if len(d.Access) > 0 {
			ix.restricted++
		}
	}
	for _, c := range chunks {
		ix.chunks[c.ChunkID] = c
		ix.countChunksLocked(c.Doc, 1)
		ix.textBytes += int64(len(c.ChunkText) + len(c.ContextHeader))
	}
	// Old and new chunks swap under one BM25 lock: a document is never seen
	// half replaced.
	ix.bm.Update(remove, bdocs)
	ix.setPositionLocked(b)
}

// Empty reports whether the index holds no document yet.
func (ix *Index) Empty() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.chunks) == 0 && len(ix.docs) == 0
}

// loadSlice is how many chunks a first load analyzes at a time: the rows
// and analyzed terms of a whole million-chunk corpus would take gigabytes.
var loadSlice = 16384

// Loader fills an empty index from a streamed full load (the replica is
// not serving yet): documents first, then their chunks in document order.
// Slices of chunks are analyzed and indexed by a worker while the caller
// keeps reading rows, so reading and analysis overlap and only a slice or
// two of rows is held at a time. The generation moves only in Finish.
type Loader struct {
	ix   *Index
	docs map[int64]*Document
	buf  []store.Chunk
	work chan []store.Chunk
	done chan struct{}
}

// NewLoader starts a load into an empty index.
func (ix *Index) NewLoader() *Loader {
	l := &Loader{ix: ix, docs: map[int64]*Document{}, work: make(chan []store.Chunk, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for rows := range l.work {
			l.index(rows)
		}
	}()
	return l
}

// Documents registers the load's documents (before any of their chunks).
func (l *Loader) Documents(ds []store.Document) {
	docs, _ := Records(ds, nil)
	l.ix.mu.Lock()
	defer l.ix.mu.Unlock()
	for id, d := range docs {
		l.docs[id] = d
		l.ix.docs[id] = d
		l.ix.incCat(d.Category)
		if len(d.Access) > 0 {
			l.ix.restricted++
		}
	}
}

// Chunk adds one chunk row; a full slice is handed to the worker at a
// document boundary, so a document's chunks are indexed together.
func (l *Loader) Chunk(c store.Chunk) {
	if n := len(l.buf); n >= loadSlice && l.buf[n-1].DocumentID != c.DocumentID {
		l.work <- l.buf
		l.buf = make([]store.Chunk, 0, loadSlice+64)
	}
	l.buf = append(l.buf, c)
}

// Finish indexes what is left, trims the postings and publishes the
// generation. An abandoned load (the read failed) also ends with Finish,
// with generation 0: the next sync reads everything again and replaces
// what this one added.
func (l *Loader) Finish(gen int64, last time.Time) {
	if len(l.buf) > 0 {
		l.work <- l.buf
		l.buf = nil
	}
	close(l.work)
	<-l.done
	l.ix.bm.Trim()
	l.ix.mu.Lock()
	defer l.ix.mu.Unlock()
	l.ix.setPositionLocked(&Batch{Generation: gen, LastChange: last})
}

func (l *Loader) index(rows []store.Chunk) {
	chunks := make([]*Chunk, 0, len(rows))
	l.ix.mu.Lock()
	for _, c := range rows {
		if r := record(l.docs[c.DocumentID], c); r != nil {
			chunks = append(chunks, r)
		}
	}
	l.ix.mu.Unlock()
	bdocs := l.ix.analyze(chunks)
	l.ix.mu.Lock()
	for _, c := range chunks {
		l.ix.chunks[c.ChunkID] = c
		l.ix.countChunksLocked(c.Doc, 1)
		l.ix.textBytes += int64(len(c.ChunkText) + len(c.ContextHeader))
	}
	l.ix.mu.Unlock()
	l.ix.bm.ReplaceBatch(bdocs)
}

// analyze turns chunks into BM25 documents in parallel and, with
// TextInDatabase, drops their text afterwards.
func (ix *Index) analyze(chunks []*Chunk) []bm25.Doc {
	bdocs := make([]bm25.Doc, len(chunks))
	parallel(len(chunks), func(i int) {
		c := chunks[i]
		bdocs[i] = bm25.Doc{ChunkID: c.ChunkID, Category: c.Doc.class(), Terms: analysis.IndexedTerms(ix.an, c.ContextHeader, c.ChunkText)}
		if ix.opt.TextInDatabase {
			c.ContextHeader, c.ChunkText, c.TextInDatabase = "", "", true
		}
	})
	return bdocs
}

func (ix *Index) setPositionLocked(b *Batch) {
	if b.Generation > ix.generation {
		ix.generation = b.Generation
	}
	if b.LastChange.After(ix.lastChange) {
		ix.lastChange = b.LastChange
	}
}

// SetPosition records the feed position when a poll found no document
// changes (the generation may still have moved past tombstones of unknown
// documents).
func (ix *Index) SetPosition(gen int64, last time.Time) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if gen > ix.generation {
		ix.generation = gen
	}
	if last.After(ix.lastChange) {
		ix.lastChange = last
	}
}

func (ix *Index) incCat(c string) {
	if ix.cats[c] == 0 {
		f := strings.ToLower(c)
		ix.catFold[f] = append(ix.catFold[f], c)
	}
	ix.cats[c]++
}

func (ix *Index) decCat(c string) {
	ix.cats[c]--
	if ix.cats[c] <= 0 {
		delete(ix.cats, c)
		f := strings.ToLower(c)
		names := ix.catFold[f][:0]
		for _, n := range ix.catFold[f] {
			if n != c {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			delete(ix.catFold, f)
		} else {
			ix.catFold[f] = names
		}
	}
}

// ResolveCategory maps a requested category to the stored names it means
// (exact name first, else case-insensitive); nil when none exists.
func (ix *Index) ResolveCategory(name string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if name == "" {
		return nil
	}
	if ix.cats[name] > 0 {
		return []string{name}
	}
	return append([]string(nil), ix.catFold[strings.ToLower(name)]...)
}

// chunkClass counts the loaded chunks of one category and access list.
type chunkClass struct {
	category string
	list     []string // nil: everyone's
	key      string   // access.Key(list): chunks.access_key
	chunks   int
}

// countChunksLocked adds n chunks of document d to its category's and its
// class's counts.
func (ix *Index) countChunksLocked(d *Document, n int) {
	if ix.catChunks[d.Category] += n; ix.catChunks[d.Category] <= 0 {
		delete(ix.catChunks, d.Category)
	}
	k := d.class()
	c := ix.classes[k]
	if c == nil {
		c = &chunkClass{category: d.Category, list: d.Access, key: access.Key(d.Access)}
		ix.classes[k] = c
	}
	if c.chunks += n; c.chunks <= 0 {
		delete(ix.classes, k)
	}
}

// Readable is what an access set may read of the loaded chunks of a
// category scope.
type Readable struct {
	// InScope counts the scope's chunks, Chunks those the set may read.
	InScope, Chunks int
	// Categories are the stored categories holding readable chunks, and
	// Keys the access keys (platform/access.Key, "" for everyone's) of
	// the lists the set may read among them; both sorted.
	Categories, Keys []string
	// Classes are the readable (category, access key) pairs.
	Classes []store.Class
}

// Readable tells what the access set callerAccess may read of the chunks
// of the given stored categories (all when empty): a walk of the classes,
// not of the documents, so it is cheap enough for every restricted query
// while lists are shared by many documents.
func (ix *Index) Readable(categories, callerAccess []string) Readable {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var r Readable
	cats, keys := map[string]bool{}, map[string]bool{}
	for _, c := range ix.classes {
		if len(categories) > 0 && !slices.Contains(categories, c.category) {
			continue
		}
		r.InScope += c.chunks
		if !access.Allows(callerAccess, c.list) {
			continue
		}
		r.Chunks += c.chunks
		cats[c.category], keys[c.key] = true, true
		r.Classes = append(r.Classes, store.Class{Category: c.category, AccessKey: c.key})
	}
	r.Categories = slices.Sorted(maps.Keys(cats))
	r.Keys = slices.Sorted(maps.Keys(keys))
	return r
}

// ChunksIn counts the chunks of the given stored categories (a map read
// per category: cheap enough for every filtered query).
func (ix *Index) ChunksIn(categories []string) (in, total int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for _, c := range categories {
		in += ix.catChunks[c]
	}
	return in, len(ix.chunks)
}

// HasRestricted reports whether any document has an access list, so a
// caller's access set can hide something: whole-corpus figures (a model's
// training size, a sync's counts) are withheld from restricted callers
// only then.
func (ix *Index) HasRestricted() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.restricted > 0
}

// Chunk returns a chunk by id.
func (ix *Index) Chunk(id int64) *Chunk {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.chunks[id]
}

// Chunks returns the chunks of ids that are loaded (nil for the others).
func (ix *Index) Chunks(ids []int64) []*Chunk {
	out := make([]*Chunk, len(ids))
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i, id := range ids {
		out[i] = ix.chunks[id]
	}
	return out
}

// SearchBM25 returns the top k chunks for the analyzed query terms,
// restricted to the given stored categories (all when empty) and to the
// documents the access set callerAccess may read (all when nil): both
// are tested inside the posting walk, so the k come back full.
func (ix *Index) SearchBM25(terms []string, categories []string, callerAccess []string, k int) []bm25.Hit {
	opts := bm25.SearchOptions{K: k}
	if callerAccess == nil && len(categories) == 0 {
		return ix.bm.Search(terms, opts)
	}
	// A restricted document's class is its category and its list
	// (Document.class), so a category filter is tested on the class's
	// category part, never as a class name: that would leave out every
	// restricted document of the category.
	opts.Keep = func(class string) bool {
		cat, list := splitClass(class)
		if len(categories) > 0 && !slices.Contains(categories, cat) {
			return false
		}
		return access.Allows(callerAccess, list)
	}
	return ix.bm.Search(terms, opts)
}

// EachTerm calls fn with every indexed term and its live chunk count.
func (ix *Index) EachTerm(fn func(term string, df int)) { ix.bm.EachTerm(fn) }

// LiveChunks is the number of chunks loaded.
func (ix *Index) LiveChunks() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.chunks)
}

// MatchedTerms is bm25.Index.MatchedTerms: for each chunk, the distinct
// terms of terms that occur in it.
func (ix *Index) MatchedTerms(chunkIDs []int64, terms []string) [][]string {
	return ix.bm.MatchedTerms(chunkIDs, terms)
}

// Stats describe the index.
type Stats struct {
	Documents  int
	Chunks     int
	Terms      int
	Postings   int
	BM25Bytes  int64
	TextBytes  int64
	Generation int64
	LastChange time.Time
}

// Stats returns a snapshot.
func (ix *Index) Stats() Stats {
	bs := ix.bm.Stats()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return Stats{Documents: len(ix.docs), Chunks: len(ix.chunks), Terms: bs.Terms, Postings: bs.Postings,
		BM25Bytes: bs.MemoryBytes, TextBytes: ix.textBytes, Generation: ix.generation, LastChange: ix.lastChange}
}

// Generation is the change-feed generation the index has caught up with.
func (ix *Index) Generation() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.generation
}

// CountIn counts the documents and chunks of the given categories (nil:
// every category) that the access set callerAccess may read (nil: all): a
// read scope's status. It walks every document, so it is not for the
// query path.
func (ix *Index) CountIn(cats map[string]bool, callerAccess []string) (docs, chunks int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for _, d := range ix.docs {
		if (cats == nil || cats[d.Category]) && access.Allows(callerAccess, d.Access) {
			docs++
			chunks += len(d.Chunks)
		}
	}
	return docs, chunks
}

// Categories lists non-empty category names with document counts; with
// an access set (not nil), only the documents it may read count, and
// categories without any are left out.
func (ix *Index) Categories(callerAccess []string) map[string]int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make(map[string]int, len(ix.cats))
	if callerAccess == nil {
		for c, n := range ix.cats {
			if c != "" {
				out[c] = n
			}
		}
		return out
	}
	for _, d := range ix.docs {
		if d.Category != "" && access.Allows(callerAccess, d.Access) {
			out[d.Category]++
		}
	}
	return out
}

func parallel(n int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 64 || workers == 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
