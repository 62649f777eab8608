package index

import (
	"crypto/sha256"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// batch builds a change batch of synthetic documents until chunks chunks.
func batch(t testing.TB, chunks int) *Batch {
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	g := syntheticdocs.New(1, 30_000)
	b := &Batch{Generation: 1, LastChange: time.Now()}
	var id int64
	for i := 0; len(b.Chunks) < chunks; i++ {
		d := g.Document(i)
		cs, err := ck.Split(t.Context(), chunker.Markdown, d.Title, string(d.Content))
		require.NoError(t, err)
		doc := store.Document{ID: int64(i + 1), ExternalID: d.ExternalId, SourceFile: d.SourceFile, Category: d.Category, Title: d.Title, Generation: 1}
		b.Documents = append(b.Documents, doc)
		for _, c := range cs {
			id++
			h := sha256.Sum256([]byte(c.ChunkText))
			b.Chunks = append(b.Chunks, store.Chunk{ChunkID: id, DocumentID: doc.ID, ChunkIndex: c.ChunkIndex, TotalChunks: c.TotalChunks, ContextHeader: c.ContextHeader, ChunkText: c.ChunkText, ChunkTokenCount: c.ChunkTokenCount, Hash: h[:]})
		}
	}
	return b
}

func TestApplyReplaceDelete(t *testing.T) {
	ix := New(analysis.NewEnglish(), bm25.DefaultParams())
	b := batch(t, 50)
	ix.Apply(b)
	st := ix.Stats()
	require.Equal(t, len(b.Documents), st.Documents)
	require.Equal(t, len(b.Chunks), st.Chunks)
	cat := b.Documents[0].Category
	require.Equal(t, []string{cat}, ix.ResolveCategory(cat))
	require.Equal(t, []string{cat}, ix.ResolveCategory(toUpper(cat)))

	// Replace document 1 with a single new chunk; delete document 2.
	d1 := b.Documents[0]
	d1.Generation = 2
	ix.Apply(&Batch{Generation: 2, Documents: []store.Document{d1}, Chunks: []store.Chunk{{ChunkID: 100000, DocumentID: d1.ID, TotalChunks: 1, ChunkText: "zebra crossing"}},
		Deleted: []int64{b.Documents[1].ID}})
	require.Len(t, ix.SearchBM25(analysis.NewEnglish().Terms("zebra"), nil, nil, 10), 1)
	for _, c := range b.Chunks {
		if c.DocumentID <= 2 {
			require.Nil(t, ix.Chunk(c.ChunkID), "old chunk %d gone", c.ChunkID)
		}
	}
	require.Equal(t, int64(2), ix.Generation())
	require.Equal(t, len(b.Documents)-1, ix.Stats().Documents)
	require.Equal(t, [][]string{{"zebra"}}, ix.MatchedTerms([]int64{100000}, []string{"zebra", "lion"}))
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestMemoryPer100kChunks measures the heap of the in-memory index (BM25
// postings, chunk records and text) for BMCIS_INDEX_MEMORY_CHUNKS synthetic
// chunks (skipped when unset; docs/SEARCH.md quotes its output).
func TestMemoryPer100kChunks(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BMCIS_INDEX_MEMORY_CHUNKS"))
	if n <= 0 {
		t.Skip("set BMCIS_INDEX_MEMORY_CHUNKS=100000 to measure")
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// The chunker's tables are loaded once and stay: load them first.
	batch(t, 1)
	before := heap()
	b := batch(t, n)
	textBytes := 0
	for _, c := range b.Chunks {
		textBytes += len(c.ChunkText) + len(c.ContextHeader)
	}
	// BMCIS_INDEX_MEMORY_TEXT=database measures the text-less layout.
	ix := NewWithOptions(analysis.NewEnglish(), bm25.DefaultParams(), Options{TextInDatabase: os.Getenv("BMCIS_INDEX_MEMORY_TEXT") == "database"})
	t0 := time.Now()
	ix.Apply(b)
	build := time.Since(t0)
	b = nil
	after := heap()
	st := ix.Stats()
	t.Logf("%d chunks (%d documents): heap %.1f MiB (%.0f bytes/chunk); text %.1f MiB; bm25 estimate %.1f MiB; %d terms, %d postings; built in %s",
		st.Chunks, st.Documents, float64(after-before)/(1<<20), float64(after-before)/float64(st.Chunks),
		float64(textBytes)/(1<<20), float64(st.BM25Bytes)/(1<<20), st.Terms, st.Postings, build)
	runtime.KeepAlive(ix)
}

func BenchmarkSearchBM25(b *testing.B) {
	ix := New(analysis.NewEnglish(), bm25.DefaultParams())
	ix.Apply(batch(b, 20_000))
	g := syntheticdocs.New(1, 30_000)
	an := analysis.NewEnglish()
	qs := make([][]string, 100)
	for i := range qs {
		qs[i] = an.Terms(g.Query(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix.SearchBM25(qs[i%len(qs)], nil, nil, 100)
	}
}

// TestSlicedFirstLoadMatchesOneBatch pins the first load's slicing and the
// text-in-database option: the same corpus ranks the same either way, the
// category counts agree, and only the option drops the text.
func TestSlicedFirstLoadMatchesOneBatch(t *testing.T) {
	b := batch(t, 600)
	whole := New(analysis.NewEnglish(), bm25.DefaultParams())
	whole.Apply(b)

	defer func(n int) { loadSlice = n }(loadSlice)
	loadSlice = 64
	sliced := NewWithOptions(analysis.NewEnglish(), bm25.DefaultParams(), Options{TextInDatabase: true})
	sliced.Apply(batch(t, 600))
	require.True(t, sliced.TextInDatabase())
	require.Equal(t, whole.Stats().Chunks, sliced.Stats().Chunks)
	require.Equal(t, whole.Stats().Postings, sliced.Stats().Postings)
	require.Equal(t, whole.Generation(), sliced.Generation())
	require.Zero(t, sliced.Stats().TextBytes)

	an := analysis.NewEnglish()
	g := syntheticdocs.New(1, 30_000)
	for i := 0; i < 20; i++ {
		q := an.Terms(g.Query(i))
		require.Equal(t, whole.SearchBM25(q, nil, nil, 20), sliced.SearchBM25(q, nil, nil, 20), "query %d", i)
	}
	cat := b.Documents[0].Category
	in, total := sliced.ChunksIn([]string{cat})
	wantIn := 0
	for _, c := range b.Chunks {
		if b.Documents[c.DocumentID-1].Category == cat {
			wantIn++
		}
	}
	require.Equal(t, wantIn, in)
	require.Equal(t, len(b.Chunks), total)
	c := sliced.Chunk(b.Chunks[0].ChunkID)
	require.True(t, c.TextInDatabase)
	require.Empty(t, c.ChunkText)
	require.NotEmpty(t, whole.Chunk(b.Chunks[0].ChunkID).ChunkText)
}

// TestReadable: the per-class counts behind the engine's choice of vector
// path follow documents as they are added, change list and go, however
// the index was filled (Apply, a Loader).
func TestReadable(t *testing.T) {
	lists := [][]string{nil, {"group:hr"}, {"group:legal"}, {"group:hr", "user:alice"}}
	b := batch(t, 200)
	for i := range b.Documents {
		b.Documents[i].Access = lists[i%len(lists)]
	}
	applied := New(analysis.NewEnglish(), bm25.DefaultParams())
	applied.Apply(b)
	loaded := New(analysis.NewEnglish(), bm25.DefaultParams())
	l := loaded.NewLoader()
	l.Documents(b.Documents)
	for _, c := range b.Chunks {
		l.Chunk(c)
	}
	l.Finish(1, time.Now())

	// Expected figures, counted by hand from the batch.
	type want struct{ inScope, chunks int }
	count := func(cat string, set []string) (w want, cats, classes map[string]bool) {
		cats, classes = map[string]bool{}, map[string]bool{}
		perDoc := map[int64]int{}
		for _, c := range b.Chunks {
			perDoc[c.DocumentID]++
		}
		for _, d := range b.Documents {
			if cat != "" && d.Category != cat {
				continue
			}
			w.inScope += perDoc[d.ID]
			if access.Allows(set, d.Access) {
				w.chunks += perDoc[d.ID]
				cats[d.Category] = true
				classes[access.Key(d.Access)] = true
			}
		}
		return w, cats, classes
	}
	cat := b.Documents[0].Category
	for _, ix := range []*Index{applied, loaded} {
		for _, c := range []string{"", cat} {
			for _, set := range [][]string{{"everyone"}, {"everyone", "group:hr"}, {"everyone", "user:alice"}, {"everyone", "group:hr", "group:legal"}} {
				var cats []string
				if c != "" {
					cats = []string{c}
				}
				w, wantCats, wantClasses := count(c, set)
				r := ix.Readable(cats, set)
				require.Equal(t, w, want{r.InScope, r.Chunks}, "%q %v", c, set)
				require.Len(t, r.Categories, len(wantCats))
				for _, k := range r.Keys {
					require.True(t, wantClasses[k], "%q %v: class %q", c, set, k)
				}
				require.Len(t, r.Keys, len(wantClasses), "%q %v", c, set)
				for _, cl := range r.Classes {
					require.True(t, wantCats[cl.Category] && wantClasses[cl.AccessKey], "%q %v: %v", c, set, cl)
				}
			}
		}
	}
	require.Equal(t, want{len(b.Chunks), len(b.Chunks)}, func() want {
		r := applied.Readable(nil, []string{"everyone", "group:hr", "group:legal"})
		return want{r.InScope, r.Chunks}
	}(), "hr and legal read every list")

	// Every document becomes legal's, then goes: the old classes empty out.
	var ids []int64
	for i := range b.Documents {
		b.Documents[i].Access = []string{"group:legal"}
		ids = append(ids, b.Documents[i].ID)
	}
	applied.Apply(&Batch{Generation: 2, Documents: b.Documents, Chunks: b.Chunks})
	r := applied.Readable(nil, []string{"everyone", "group:hr"})
	require.Equal(t, len(b.Chunks), r.InScope)
	require.Zero(t, r.Chunks)
	require.Len(t, applied.classes, len(applied.catChunks), "one class per category is left")
	applied.Apply(&Batch{Generation: 3, Deleted: ids})
	require.Empty(t, applied.classes)
	require.Zero(t, applied.Readable(nil, []string{"everyone"}).InScope)
}

// TestCategoryFilterKeepsRestrictedDocuments: an unrestricted caller's
// category filter keeps the category's restricted documents too (their
// BM25 class is the category and the list), and ranks exactly as a caller
// who may read every list.
func TestCategoryFilterKeepsRestrictedDocuments(t *testing.T) {
	lists := [][]string{nil, {"group:hr"}, {"group:legal"}, {"user:alice"}}
	b := batch(t, 300)
	restricted := map[int64]bool{}
	for i := range b.Documents {
		b.Documents[i].Access = lists[i%len(lists)]
		restricted[b.Documents[i].ID] = lists[i%len(lists)] != nil
	}
	ix := New(analysis.NewEnglish(), bm25.DefaultParams())
	ix.Apply(b)
	cat := b.Documents[1].Category
	var terms []string
	for _, c := range b.Chunks {
		if c.DocumentID == b.Documents[1].ID {
			terms = analysis.NewEnglish().Terms(c.ChunkText)
			break
		}
	}
	open := ix.SearchBM25(terms, []string{cat}, nil, 20)
	require.NotEmpty(t, open)
	sawRestricted := false
	for _, h := range open {
		c := ix.Chunk(h.ChunkID)
		require.Equal(t, cat, c.Doc.Category)
		sawRestricted = sawRestricted || restricted[c.Doc.ID]
	}
	require.True(t, sawRestricted, "document 2 (group:hr) matches its own text")
	require.Equal(t, open, ix.SearchBM25(terms, []string{cat}, []string{"everyone", "group:hr", "group:legal", "user:alice"}, 20))
}
