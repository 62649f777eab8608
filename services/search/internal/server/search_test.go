package server_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// BM25 on a corpus small enough to compute by hand: plain-text documents
// without titles, so each chunk's indexed text is exactly its content.
func TestBM25ScoresMatchTheFormula(t *testing.T) {
	r, _ := start(t)
	texts := map[string]string{
		"d1": "apple apple banana",
		"d2": "apple cherry cherry cherry",
		"d3": "banana cherry",
		"d4": "date",
	}
	var docs []*searchv1.Document
	for id, s := range texts {
		docs = append(docs, txt(id, "", s))
	}
	mustIngest(t, r.client, docs...)

	// Expected raw scores: idf = ln(1 + (N - df + 0.5)/(df + 0.5)), k1 1.2, b 0.75.
	an := analysis.NewEnglish()
	lens := map[string]float64{}
	total := 0.0
	for id, s := range texts {
		lens[id] = float64(len(an.Terms(s)))
		total += lens[id]
	}
	avgdl := total / float64(len(texts))
	k1, b := 1.2, 0.75
	query := []string{"apple", "cherry"}
	raw := map[string]float64{}
	for id, s := range texts {
		terms := an.Terms(s)
		for _, q := range query {
			qt := an.Terms(q)[0]
			tf, df := 0.0, 0
			for _, t := range terms {
				if t == qt {
					tf++
				}
			}
			for _, s2 := range texts {
				for _, t := range an.Terms(s2) {
					if t == qt {
						df++
						break
					}
				}
			}
			if tf > 0 {
				raw[id] += bm25.IDF(len(texts), df) * tf * (k1 + 1) / (tf + k1*(1-b+b*lens[id]/avgdl))
			}
		}
	}
	require.InDelta(t, math.Ln2, bm25.IDF(4, 2), 1e-12, "idf of a term in 2 of 4 documents")
	type exp struct {
		id    string
		score float64
	}
	var want []exp
	for id, s := range raw {
		want = append(want, exp{id, s})
	}
	sort.Slice(want, func(i, j int) bool { return want[i].score > want[j].score })
	out := search(t, r.client, &searchv1.SearchRequest{Query: "apple cherry", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	require.Len(t, out.Results, len(want))
	for i, w := range want {
		res := out.Results[i]
		require.Equal(t, w.id, res.Chunk.DocumentId, "rank %d", i+1)
		require.InDelta(t, w.score/want[0].score, res.Bm25Score, 1e-5, "normalized BM25 of %s", w.id)
		require.EqualValues(t, i+1, res.Bm25Rank)
	}
	require.Equal(t, []string{"apple", "cherry"}, out.Results[0].MatchedTerms)
}

func TestHybridScoresFollowRRF(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(40)...)
	check := func(t *testing.T, c searchv1.SearchServiceClient, k, wb, wv float64) {
		out := search(t, c, &searchv1.SearchRequest{Query: "cloud network security audit", Limit: 50})
		require.NotEmpty(t, out.Results)
		maxFused := (wb + wv) / (k + 1)
		prev := math.Inf(1)
		var prevID int64
		sawBoth := false
		for _, res := range out.Results {
			fused := 0.0
			if res.Bm25Rank > 0 {
				fused += wb / (k + float64(res.Bm25Rank))
			}
			if res.VectorRank > 0 {
				fused += wv / (k + float64(res.VectorRank))
			}
			require.InDelta(t, fused/maxFused, res.HybridScore, 1e-9)
			if res.HybridScore == prev {
				require.Greater(t, res.Chunk.ChunkId, prevID, "ties break on chunk id")
			} else {
				require.Less(t, res.HybridScore, prev)
			}
			prev, prevID = res.HybridScore, res.Chunk.ChunkId
			switch {
			case res.Bm25Rank > 0 && res.VectorRank > 0:
				sawBoth = true
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, res.ScoreType)
			case res.Bm25Rank > 0:
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, res.ScoreType)
				require.Zero(t, res.SimilarityScore)
			default:
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, res.ScoreType)
				require.Zero(t, res.Bm25Score)
			}
		}
		require.True(t, sawBoth)
	}
	t.Run("builtin preset: convex, BM25 share alpha", func(t *testing.T) {
		// This corpus's sentences have too few terms in the model's
		// vocabulary to make fine-tuning pairs, so its model is plain LSA,
		// with its own preset (engine.TestFusionPresetFollowsTheActiveModel
		// covers the choice). Feedback off: with it the fused cosine is
		// the one to the feedback vector, which no result reports
		// (similarity_score is to the query), and the fit needs the two
		// to be the same.
		cfg3 := testConfig()
		cfg3.Fusion.FeedbackChunks = -1
		checkConvex(t, startReplica(t, pool, cfg3).client, fusion.BuiltinLSAOptions().Alpha)
	})
	t.Run("configured rrf k=5, weights 1/0.15", func(t *testing.T) {
		cfg2 := testConfig()
		cfg2.Fusion.Method, cfg2.Fusion.K, cfg2.Fusion.BM25Weight, cfg2.Fusion.VectorWeight = "rrf", 5, 1, 0.15
		r2 := startReplica(t, pool, cfg2)
		check(t, r2.client, 5, 1, 0.15)
	})
	t.Run("configured rrf k=60, weights 1/1", func(t *testing.T) {
		cfg2 := testConfig()
		cfg2.Fusion.Method, cfg2.Fusion.K, cfg2.Fusion.BM25Weight, cfg2.Fusion.VectorWeight = "rrf", 60, 1, 1
		r2 := startReplica(t, pool, cfg2)
		check(t, r2.client, 60, 1, 1)
	})
}

func TestPaginationReturnsEveryResultOnceInOrder(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(40)...)
	// Every list below, cached or fresh, comes from the one vector path.
	awaitMirror(t, r, "overview security cloud kafka")
	for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR} {
		t.Run(mode.String(), func(t *testing.T) {
			first := search(t, r.client, &searchv1.SearchRequest{Query: "overview security cloud kafka", Mode: mode, Limit: 7})
			total := int(first.TotalAvailable)
			require.Greater(t, total, 14, "enough results for several pages")
			seen := map[int64]bool{}
			var all []*searchv1.SearchResult
			for off := 0; off < total; off += 7 {
				page := search(t, r.client, &searchv1.SearchRequest{Query: "overview security cloud kafka", Mode: mode, Limit: 7, Offset: int32(off)})
				require.EqualValues(t, total, page.TotalAvailable)
				require.True(t, page.CacheHit, "later pages come from the cache")
				require.Zero(t, page.DatabaseTimeMs)
				for i, res := range page.Results {
					require.EqualValues(t, off+i+1, res.Rank)
					require.False(t, seen[res.Chunk.ChunkId], "chunk %d twice", res.Chunk.ChunkId)
					seen[res.Chunk.ChunkId] = true
				}
				all = append(all, page.Results...)
			}
			require.Len(t, all, total)
			// The same list uncached, in one go, is identical.
			fresh := search(t, r.client, &searchv1.SearchRequest{Query: "overview security cloud kafka", Mode: mode, Limit: 50, NoCache: true})
			for i, res := range fresh.Results {
				require.Equal(t, all[i].Chunk.ChunkId, res.Chunk.ChunkId)
				require.Equal(t, all[i].HybridScore, res.HybridScore)
			}
			past := search(t, r.client, &searchv1.SearchRequest{Query: "overview security cloud kafka", Mode: mode, Limit: 7, Offset: int32(total + 5)})
			require.Empty(t, past.Results)
			require.EqualValues(t, total, past.TotalAvailable)
		})
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The cache is partitioned by the caller the edges name
// (platform/cacheowner): a search another key just made is not a hit for
// this one (no cache_hit, and a ranking of its own: a second cache miss),
// while this key's own repeat is. Calls naming no caller share one partition.
func TestCacheHitIsTheCallersOwn(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.CacheTTL = time.Minute // no step of this test outlasts it
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(12)...)
	as := func(key string) context.Context {
		return cacheowner.Outgoing(cacheowner.With(context.Background(), key))
	}
	searchAs := func(ctx context.Context, q string) *searchv1.SearchResponse {
		resp, err := r.client.Search(ctx, &searchv1.SearchRequest{Query: q, Limit: 5})
		require.NoError(t, err)
		return resp
	}
	alice, bob := as("bmcis_alice_key"), as("bmcis_bob_key")

	first := searchAs(alice, "firewall audit")
	require.False(t, first.CacheHit)
	other := searchAs(bob, "firewall audit")
	require.False(t, other.CacheHit, "alice's search is not a hit for bob")
	require.EqualValues(t, 2, counter(t, r.reg, "bmcis_search_cache_requests_total", "result", "miss"), "bob's list is ranked for him")
	require.Equal(t, first.Results[0].Chunk.ChunkId, other.Results[0].Chunk.ChunkId)
	require.True(t, searchAs(alice, "firewall audit").CacheHit, "alice's own repeat is")
	require.True(t, searchAs(bob, "Firewall  audit").CacheHit, "and bob's")

	// No caller named (bmcisctl): one shared partition, apart from the keys'.
	require.False(t, search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit", Limit: 5}).CacheHit)
	require.True(t, search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit", Limit: 5}).CacheHit)
}

func TestCacheHitExpiryAndInvalidation(t *testing.T) {
	pool, _ := newDB(t)
	// A TTL no step of this test outlasts, however loaded the machine: the
	// hits below are hits. Expiry is shown on a second replica with a short
	// one.
	cfg := testConfig()
	cfg.CacheTTL = time.Minute
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(12)...)
	req := func(q string) *searchv1.SearchRequest {
		return &searchv1.SearchRequest{Query: q, Limit: 5}
	}
	miss := search(t, r.client, req("firewall audit"))
	require.False(t, miss.CacheHit)
	hit := search(t, r.client, req("  Firewall   AUDIT "))
	require.True(t, hit.CacheHit, "normalized query shares the entry")
	require.Zero(t, hit.DatabaseTimeMs)
	require.Equal(t, miss.Results[0].Chunk.ChunkId, hit.Results[0].Chunk.ChunkId)
	require.EqualValues(t, 1, counter(t, r.reg, "bmcis_search_cache_requests_total", "result", "hit"))
	require.EqualValues(t, 1, counter(t, r.reg, "bmcis_search_cache_requests_total", "result", "miss"))

	// Another mode or filter is another entry; no_cache neither reads nor writes.
	require.False(t, search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit", Limit: 5, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25}).CacheHit)
	require.False(t, search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit", Limit: 5, Categories: []string{"security"}}).CacheHit)
	require.False(t, search(t, r.client, &searchv1.SearchRequest{Query: "payroll zebra", Limit: 5, NoCache: true}).CacheHit)
	require.False(t, search(t, r.client, req("payroll zebra")).CacheHit)

	// Expiry: on a replica with a 1 s TTL, an entry that served a hit is
	// missed again later (each miss stores the entry anew).
	shortCfg := testConfig()
	shortCfg.CacheTTL = time.Second
	short := startReplica(t, pool, shortCfg)
	hitSeen := false
	require.Eventually(t, func() bool {
		if search(t, short.client, req("firewall audit")).CacheHit {
			hitSeen = true
			return false
		}
		return hitSeen
	}, 30*time.Second, 50*time.Millisecond, "a cached entry that served a hit never expired")

	// An unchanged re-ingestion changes nothing: entries stay.
	mustIngest(t, r.client, corpus(12)[0])
	require.True(t, search(t, r.client, req("firewall audit")).CacheHit)

	// A write invalidates: the new document shows up at once.
	mustIngest(t, r.client, md("security/new.md", "security", "Firewall audit", "# Firewall audit\n\nThe firewall audit of the firewall."))
	after := search(t, r.client, req("firewall audit"))
	require.False(t, after.CacheHit)
	require.Equal(t, "security/new.md", after.Results[0].Chunk.DocumentId)

	// So does a deletion.
	require.True(t, search(t, r.client, req("firewall audit")).CacheHit)
	_, err := r.client.DeleteDocument(context.Background(), &searchv1.DeleteDocumentRequest{ExternalId: "security/new.md"})
	require.NoError(t, err)
	gone := search(t, r.client, req("firewall audit"))
	require.False(t, gone.CacheHit)
	require.NotEqual(t, "security/new.md", gone.Results[0].Chunk.DocumentId)
}

func TestCategoryFilters(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(40)...)
	cats, err := r.client.ListCategories(context.Background(), &searchv1.ListCategoriesRequest{})
	require.NoError(t, err)
	var names []string
	for _, c := range cats.Categories {
		names = append(names, c.Name)
		require.EqualValues(t, 10, c.DocumentCount)
	}
	require.Equal(t, []string{"authentication", "cloud", "data", "security"}, names)

	for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR} {
		out := search(t, r.client, &searchv1.SearchRequest{Query: "security network backup", Mode: mode, Categories: []string{"Cloud", "data"}})
		require.NotEmpty(t, out.Results, mode.String())
		for _, res := range out.Results {
			require.Contains(t, []string{"cloud", "data"}, res.Chunk.SourceCategory)
		}
	}
	_, err = r.client.Search(context.Background(), &searchv1.SearchRequest{Query: "x", Limit: 5, Categories: []string{"nope"}})
	requireField(t, err, "categories")
}

// A filter on a rare category must not starve: the plain HNSW scan returns
// the ef_search nearest chunks and filters afterwards, which finds none of
// the rare ones here; the iterative scan keeps walking until it has them.
func TestRareCategoryFilterDoesNotStarve(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.Candidates, cfg.EfSearch = 100, 100
	r := startReplica(t, pool, cfg)
	stream := strings.Fields("kafka stream topic partition consumer broker lag offset producer replica leader follower commit segment retention compaction schema registry connector sink source window join aggregate state store changelog rebalance throughput latency")
	garden := strings.Fields("garden tomato basil watering soil compost seedling mulch pruning trellis")
	pick := func(pool []string, i, n int) string {
		var ws []string
		for k := 0; k < n; k++ {
			ws = append(ws, pool[(i*7+k*k*3+k)%len(pool)])
		}
		return strings.Join(ws, " ")
	}
	var docs []*searchv1.Document
	for i := 0; i < 400; i++ {
		d := txt(fmt.Sprintf("common-%d", i), "", pick(stream, i, 8))
		d.Category = "common"
		docs = append(docs, d)
	}
	for i := 0; i < 5; i++ {
		d := txt(fmt.Sprintf("rare-%d", i), "", pick(garden, i, 6))
		d.Category = "rare"
		docs = append(docs, d)
	}
	mustIngest(t, r.client, docs...)

	// What a plain filtered HNSW query returns (no iterative scan).
	ctx := context.Background()
	var qvec string
	require.NoError(t, pool.QueryRow(ctx, `SELECT embedding::text FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.external_id = 'common-0'`).Scan(&qvec))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL hnsw.ef_search = 100; SET LOCAL hnsw.iterative_scan = off; SET LOCAL enable_seqscan = off")
	require.NoError(t, err)
	var plain int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT id, category FROM chunks WHERE embedding IS NOT NULL
		ORDER BY embedding <=> $1::vector LIMIT 100) x WHERE category = 'rare'`, qvec).Scan(&plain))
	require.Less(t, plain, 5, "plain HNSW starves on this filter (otherwise the test proves nothing)")

	// The default answers this filter by exact distances over its rows; a
	// replica configured never to do so walks the graph iteratively. Both
	// return every rare chunk, in the same order.
	cfgIter := cfg
	cfgIter.ExactVectorMaxRows = 0
	iter := startReplica(t, pool, cfgIter)
	var got [][]int64
	for _, rep := range []*replica{r, iter} {
		out := search(t, rep.client, &searchv1.SearchRequest{Query: "kafka stream topic partition consumer", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR,
			Categories: []string{"rare"}, NoCache: true})
		require.Len(t, out.Results, 5, "every rare chunk comes back")
		var ids []int64
		for i, res := range out.Results {
			require.Equal(t, "rare", res.Chunk.SourceCategory)
			if i > 0 {
				require.LessOrEqual(t, res.SimilarityScore, out.Results[i-1].SimilarityScore, "re-sorted after relaxed order")
			}
			ids = append(ids, res.Chunk.ChunkId)
		}
		got = append(got, ids)
	}
	require.Equal(t, got[0], got[1], "exact pre-filter and iterative scan agree")
}

func requireField(t *testing.T, err error, field string) {
	t.Helper()
	requireCode(t, err, codes.InvalidArgument)
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			require.Equal(t, field, br.FieldViolations[0].Field)
			return
		}
	}
	t.Fatalf("no BadRequest detail in %v", err)
}

func TestInvalidArguments(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(4)...)
	ctx := context.Background()
	cases := []struct {
		name  string
		req   *searchv1.SearchRequest
		field string
	}{
		{"empty query", &searchv1.SearchRequest{Query: "  ", Limit: 10}, "query"},
		{"long query", &searchv1.SearchRequest{Query: strings.Repeat("é", 501), Limit: 10}, "query"},
		{"limit 0", &searchv1.SearchRequest{Query: "x"}, "limit"},
		{"limit 51", &searchv1.SearchRequest{Query: "x", Limit: 51}, "limit"},
		{"negative offset", &searchv1.SearchRequest{Query: "x", Limit: 5, Offset: -1}, "offset"},
		{"unknown category", &searchv1.SearchRequest{Query: "x", Limit: 5, Categories: []string{"nope"}}, "categories"},
		{"unknown mode", &searchv1.SearchRequest{Query: "x", Limit: 5, Mode: 9}, "mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.client.Search(ctx, c.req)
			requireField(t, err, c.field)
		})
	}
	ok := search(t, r.client, &searchv1.SearchRequest{Query: strings.Repeat("é", 500), Limit: 50})
	require.Empty(t, ok.Results)
	_, err := r.client.GetChunks(ctx, &searchv1.GetChunksRequest{})
	requireField(t, err, "chunk_ids")
	_, err = r.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: make([]int64, 101)})
	requireField(t, err, "chunk_ids")
	for _, id := range []int64{0, -1} {
		// No chunk has such an id: the id is a mistake, not a missing chunk.
		_, err = r.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{1, id}})
		requireField(t, err, "chunk_ids")
		require.Contains(t, status.Convert(err).Message(), "positive", "%d", id)
	}
}

func TestGetChunksInOrderWithMissing(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(8)...)
	out := search(t, r.client, &searchv1.SearchRequest{Query: "shared words", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 3})
	require.Len(t, out.Results, 3)
	ids := []int64{out.Results[2].Chunk.ChunkId, 999999, out.Results[0].Chunk.ChunkId}
	got, err := r.client.GetChunks(context.Background(), &searchv1.GetChunksRequest{ChunkIds: ids})
	require.NoError(t, err)
	require.Len(t, got.Chunks, 2)
	require.Equal(t, ids[0], got.Chunks[0].ChunkId)
	require.Equal(t, ids[2], got.Chunks[1].ChunkId)
	require.Equal(t, []int64{999999}, got.MissingIds)
	c := got.Chunks[1]
	require.Equal(t, out.Results[0].Chunk.ChunkText, c.ChunkText)
	require.NotEmpty(t, c.ContextHeader)
	require.Positive(t, c.ChunkTokenCount)
	require.Positive(t, c.TotalChunks)
}

func TestDuplicatesAreFlagged(t *testing.T) {
	r, _ := start(t)
	section := "## Reporting an incident\n\nReport every suspected incident in the incident channel within fifteen minutes, with the time, the system and what you saw.\n"
	mustIngest(t, r.client, append(corpus(8),
		md("a.md", "security", "Runbook", "# Runbook\n\nIntro about runbooks.\n\n"+section),
		md("b.md", "security", "Training", "# Training\n\nIntro about training.\n\n"+section),
	)...)
	out := search(t, r.client, &searchv1.SearchRequest{Query: "report suspected incident channel", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 10})
	var first, second *searchv1.SearchResult
	at := 0 // second's offset in the list
	for i, res := range out.Results {
		if strings.Contains(res.Chunk.ChunkText, "fifteen minutes") {
			if first == nil {
				first = res
			} else if second == nil {
				second, at = res, i
			}
		}
	}
	require.NotNil(t, second)
	require.False(t, first.IsDuplicate)
	require.True(t, second.IsDuplicate)
	require.Contains(t, second.SimilarChunkIds, first.Chunk.ChunkId)
	// Flags are found for the page cut from the kept list: a page starting
	// at the copy flags it the same, though the original is not on it.
	page := search(t, r.client, &searchv1.SearchRequest{Query: "report suspected incident channel", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
		Limit: 1, Offset: int32(at)})
	require.True(t, page.CacheHit)
	require.Len(t, page.Results, 1)
	require.Equal(t, second.Chunk.ChunkId, page.Results[0].Chunk.ChunkId)
	require.True(t, page.Results[0].IsDuplicate)
	require.Equal(t, second.SimilarChunkIds, page.Results[0].SimilarChunkIds)
	// A read mask naming one of the two flags gets it.
	page = search(t, r.client, &searchv1.SearchRequest{Query: "report suspected incident channel", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
		Limit: 1, Offset: int32(at), ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"results.similar_chunk_ids"}}})
	require.Equal(t, second.SimilarChunkIds, page.Results[0].SimilarChunkIds)
	page = search(t, r.client, &searchv1.SearchRequest{Query: "report suspected incident channel", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
		Limit: 1, Offset: int32(at), ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"results.is_duplicate"}}})
	require.True(t, page.Results[0].IsDuplicate)
	require.Empty(t, page.Results[0].SimilarChunkIds, "not in the mask")
	// A mask naming neither gets neither.
	page = search(t, r.client, &searchv1.SearchRequest{Query: "report suspected incident channel", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
		Limit: 1, Offset: int32(at), ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"results.chunk.chunk_id"}}})
	require.False(t, page.Results[0].IsDuplicate)
	require.Empty(t, page.Results[0].SimilarChunkIds)
}

// checkConvex checks a hybrid list against convex fusion with BM25 share
// alpha: hybrid = alpha * (min-max BM25 score) + (1 - alpha) * (min-max
// similarity). The vector list's minimum may fall outside the shown list,
// so the similarity's scaling is fitted (least squares on the chunks both
// sides returned) and only the BM25 share is checked against alpha.
func checkConvex(t *testing.T, c searchv1.SearchServiceClient, alpha float64) {
	t.Helper()
	// The whole list (both retrievers' candidates) in pages.
	var all []*searchv1.SearchResult
	for off := int32(0); ; off += 50 {
		out := search(t, c, &searchv1.SearchRequest{Query: "cloud network security audit", Limit: 50, Offset: off})
		all = append(all, out.Results...)
		if int(off)+50 >= int(out.TotalAvailable) {
			break
		}
	}
	bLo, bHi := math.Inf(1), math.Inf(-1)
	for _, res := range all {
		if res.Bm25Rank > 0 {
			bLo, bHi = math.Min(bLo, res.Bm25Score), math.Max(bHi, res.Bm25Score)
		}
	}
	require.Greater(t, bHi, bLo)
	// Normal equations of hybrid = x0*b + x1*similarity + x2.
	var m [3][4]float64
	n := 0
	prev := math.Inf(1)
	for _, res := range all {
		require.LessOrEqual(t, res.HybridScore, prev)
		prev = res.HybridScore
		if res.Bm25Rank == 0 || res.VectorRank == 0 {
			continue
		}
		n++
		row := [3]float64{(res.Bm25Score - bLo) / (bHi - bLo), res.SimilarityScore, 1}
		for i := range 3 {
			for j := range 3 {
				m[i][j] += row[i] * row[j]
			}
			m[i][3] += row[i] * res.HybridScore
		}
	}
	require.Greater(t, n, 5, "enough chunks found by both sides")
	for col := range 3 { // Gauss-Jordan with partial pivoting
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		m[col], m[p] = m[p], m[col]
		for r := range 3 {
			if r != col {
				f := m[r][col] / m[col][col]
				for k := col; k < 4; k++ {
					m[r][k] -= f * m[col][k]
				}
			}
		}
	}
	require.InDelta(t, alpha, m[0][3]/m[0][0], 1e-3, "the BM25 share")
}
