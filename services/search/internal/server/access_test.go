package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// accessCorpus is corpus(n) with access lists: by fours, everyone's,
// group:hr, group:legal, user:alice (so every category holds each kind).
func accessCorpus(n int) (docs []*searchv1.Document, lists map[string][]string) {
	docs = corpus(n)
	lists = map[string][]string{}
	kinds := [][]string{nil, {"group:hr"}, {"group:legal"}, {"user:alice"}}
	for i, d := range docs {
		d.Access = kinds[(i/4)%len(kinds)]
		lists[d.ExternalId] = d.Access
	}
	return docs, lists
}

// TestAccessSets: a request's access set keeps results, totals, chunks,
// categories and counts inside the documents it may read, in every
// retrieval mode, and the result cache never crosses sets.
func TestAccessSets(t *testing.T) {
	r, _ := start(t)
	docs, lists := accessCorpus(48)
	mustIngest(t, r.client, docs...)
	ctx := context.Background()
	const query = "security network backup incident"
	hr := []string{"everyone", "group:hr"}
	allowedFor := func(set []string) func(string) bool {
		parsed, err := access.ParseSet(set)
		require.NoError(t, err)
		return func(id string) bool { return access.Allows(parsed, lists[id]) }
	}

	for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR} {
		t.Run(mode.String(), func(t *testing.T) {
			open := search(t, r.client, &searchv1.SearchRequest{Query: query, Mode: mode, NoCache: true})
			for _, set := range [][]string{hr, {"group:legal"}, {"user:alice", "group:hr"}, {"everyone"}} {
				allowed := allowedFor(set)
				scoped := search(t, r.client, &searchv1.SearchRequest{Query: query, Mode: mode, NoCache: true,
					Scope: &searchv1.ReadScope{Access: set}})
				require.NotEmpty(t, scoped.Results, "%v", set)
				for _, res := range scoped.Results {
					require.True(t, allowed(res.Chunk.DocumentId), "%v read %s", set, res.Chunk.DocumentId)
				}
				want := 0
				for _, res := range open.Results {
					if allowed(res.Chunk.DocumentId) {
						want++
					}
				}
				require.Less(t, scoped.TotalAvailable, open.TotalAvailable, "%v", set)
				require.GreaterOrEqual(t, int(scoped.TotalAvailable), want,
					"candidates are collected inside the set: it comes back no shorter than the open list's share (%v)", set)
			}
		})
	}

	t.Run("cache", func(t *testing.T) {
		a := search(t, r.client, &searchv1.SearchRequest{Query: "cloud region", Scope: &searchv1.ReadScope{Access: hr}})
		require.False(t, a.CacheHit)
		require.True(t, search(t, r.client, &searchv1.SearchRequest{Query: "cloud region", Scope: &searchv1.ReadScope{Access: hr}}).CacheHit)
		b := search(t, r.client, &searchv1.SearchRequest{Query: "cloud region", Scope: &searchv1.ReadScope{Access: []string{"group:legal"}}})
		require.False(t, b.CacheHit, "a list ranked for one set is never another's")
		require.NotEqual(t, docIDs(a), docIDs(b))
	})

	t.Run("chunks, categories, status", func(t *testing.T) {
		open := search(t, r.client, &searchv1.SearchRequest{Query: query, NoCache: true})
		var ids []int64
		for _, res := range open.Results {
			ids = append(ids, res.Chunk.ChunkId)
		}
		got, err := r.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: ids, Scope: &searchv1.ReadScope{Access: hr}})
		require.NoError(t, err)
		allowed := allowedFor(hr)
		for _, c := range got.Chunks {
			require.True(t, allowed(c.DocumentId), c.DocumentId)
		}
		require.Len(t, got.MissingIds, len(ids)-len(got.Chunks))
		require.NotEmpty(t, got.MissingIds)

		cats, err := r.client.ListCategories(ctx, &searchv1.ListCategoriesRequest{Scope: &searchv1.ReadScope{Access: hr}})
		require.NoError(t, err)
		for _, c := range cats.Categories {
			require.Equal(t, int32(6), c.DocumentCount, "%s: everyone's and hr's documents of 12", c.Name)
		}
		st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{Scope: &searchv1.ReadScope{Access: hr}})
		require.NoError(t, err)
		require.Equal(t, int64(24), st.Documents)
		require.Zero(t, st.ModelTrainedChunks, "a restricted caller does not count the corpus")
	})

	t.Run("an entry of an unknown form", func(t *testing.T) {
		_, err := r.client.Search(ctx, &searchv1.SearchRequest{Query: query, Limit: 5, Scope: &searchv1.ReadScope{Access: []string{"hr"}}})
		requireField(t, err, "scope.access")
	})
}

// TestAccessPathsAgree: the vector side of a restricted query takes one
// of four paths by what the replica knows the caller may read (the
// engine's readScope): no filter when the set hides nothing; when the
// readable classes hold few chunks, an exact scan of them, in PostgreSQL
// or over the vectors the replica holds; pgvector's filtered iterative
// scan otherwise. Replicas that may only use one path each must rank the
// same chunks, with and without a category. Only float rounding may
// differ (the held vectors are scored in Go, not by pgvector): vector
// mode may swap neighbours whose similarities agree to 1e-5, and hybrid
// fuses those ranks, so its top 10 must be within the other's top 20.
func TestAccessPathsAgree(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	held := startReplica(t, pool, cfg)
	cfg.ClassVectorsMB = 0
	exact := startReplica(t, pool, cfg)
	cfg.ExactVectorMaxRows = 0
	iterative := startReplica(t, pool, cfg)
	docs, _ := accessCorpus(64)
	mustIngest(t, held.client, docs...)
	all := []string{"group:hr", "group:legal", "user:alice"}
	for _, r := range []*replica{held, exact, iterative} {
		require.Eventually(t, func() bool {
			return len(search(t, r.client, &searchv1.SearchRequest{Query: "item63 overview", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
				NoCache: true, Scope: &searchv1.ReadScope{Access: all}}).Results) > 0
		}, 30*time.Second, 20*time.Millisecond, "every replica loads the corpus")
		// and the model the ingest trained, which it hears of apart.
		require.Eventually(t, func() bool {
			resp, err := r.client.Search(context.Background(), &searchv1.SearchRequest{Query: "network backup incident region",
				Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 1}) // unrestricted: no classes read
			return err == nil && len(resp.Results) > 0
		}, 30*time.Second, 20*time.Millisecond, "every replica loads the model")
	}

	type ranked struct {
		ids  []int64
		sims []float64
	}
	ask := func(r *replica, req *searchv1.SearchRequest) ranked {
		var out ranked
		for _, res := range search(t, r.client, req).Results {
			out.ids = append(out.ids, res.Chunk.ChunkId)
			out.sims = append(out.sims, res.SimilarityScore)
		}
		return out
	}
	agree := func(mode searchv1.RetrievalMode, a, b ranked, msg string) {
		require.Len(t, b.ids, len(a.ids), msg)
		if mode == searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR {
			for i := range a.ids {
				if a.ids[i] != b.ids[i] {
					require.InDelta(t, a.sims[i], b.sims[i], 1e-5, "%s: position %d", msg, i)
				}
			}
			return
		}
		for _, id := range a.ids[:min(10, len(a.ids))] {
			require.Contains(t, b.ids, id, msg)
		}
	}
	for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID} {
		for _, cat := range []string{"", "cloud"} {
			for _, set := range [][]string{{"group:hr"}, {"group:legal", "user:alice"}, all} {
				req := func(set []string) *searchv1.SearchRequest {
					r := &searchv1.SearchRequest{Query: "network backup incident region", Mode: mode, NoCache: true, Limit: 20}
					if cat != "" {
						r.Categories = []string{cat}
					}
					if set != nil {
						r.Scope = &searchv1.ReadScope{Access: set}
					}
					return r
				}
				msg := fmt.Sprintf("%s %q %v", mode, cat, set)
				want := ask(iterative, req(set))
				require.NotEmpty(t, want.ids, msg)
				require.Equal(t, want.ids, ask(exact, req(set)).ids, msg)
				// The first asks PostgreSQL and starts reading the classes;
				// the later ones are answered from them.
				agree(mode, want, ask(held, req(set)), msg)
				// Asked again while waiting: a change the feed brings in
				// between drops what was read, and only a query reads again.
				require.Eventually(t, func() bool {
					ask(held, req(set))
					return gaugeValue(t, held, "bmcis_search_class_vectors") > 0
				}, 10*time.Second, 10*time.Millisecond, msg)
				agree(mode, want, ask(held, req(set)), msg+" (held)")
				if len(set) == len(all) {
					require.Equal(t, ask(exact, req(nil)).ids, want.ids,
						"a set that hides nothing ranks as an unrestricted caller (%s)", msg)
				}
			}
		}
	}

	// A document written through another replica: its vectors wait in the
	// queue, which the held path reads too; merged into chunks.embedding,
	// they take a new vectors generation, so the held vectors read before
	// are not used without them.
	late := md("late/hr.md", "cloud", "Late", "# Late\n\nzebra quagga okapi network backup incident region\n")
	late.Access = []string{"group:hr"}
	mustIngest(t, exact.client, late)
	find := func() bool {
		out := search(t, held.client, &searchv1.SearchRequest{Query: "network backup incident region", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR,
			NoCache: true, Limit: 50, Scope: &searchv1.ReadScope{Access: []string{"group:hr"}}})
		return slices.Contains(docIDs(out), "late/hr.md")
	}
	require.Eventually(t, find, 30*time.Second, 10*time.Millisecond, "found from the queue once the replica loads the document")
	// The late document's vectors move the feed once more after it is
	// found, which drops the classes read; each ask reads them again.
	require.Eventually(t, func() bool {
		return find() && gaugeValue(t, held, "bmcis_search_class_vectors") > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.True(t, find())
	n, err := store.New(pool).MergeQueued(context.Background(), 1000)
	require.NoError(t, err)
	require.Positive(t, n)
	require.True(t, find(), "merged: still found, before the replica hears of the merge")
}

// TestAccessChangeWithoutReembedding: re-ingesting a document whose only
// change is its access list rewrites no chunk and no vector, and every
// replica converges on the new list.
func TestAccessChangeWithoutReembedding(t *testing.T) {
	pool, _ := newDB(t)
	r := startReplica(t, pool, testConfig())
	other := startReplica(t, pool, testConfig())
	docs, _ := accessCorpus(40)
	mustIngest(t, r.client, docs...)
	ctx := context.Background()
	state := func() (gen, queued, embedded int64, ids []int64) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT vectors_generation, (SELECT count(*) FROM chunk_vector_queue),
			(SELECT count(*) FROM chunks WHERE embedding IS NOT NULL) FROM search_state`).Scan(&gen, &queued, &embedded))
		rows, err := pool.Query(ctx, `SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id
			WHERE d.external_id = $1 ORDER BY c.id`, docs[4].ExternalId)
		require.NoError(t, err)
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		require.NoError(t, rows.Err())
		return gen, queued, embedded, ids
	}
	gen0, queued0, embedded0, ids0 := state()
	require.Equal(t, []string{"group:hr"}, docs[4].Access)
	sees := func(rep *replica, set []string) bool {
		out := search(t, rep.client, &searchv1.SearchRequest{Query: "item4 overview", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
			NoCache: true, Scope: &searchv1.ReadScope{Access: set}})
		return slices.Contains(docIDs(out), docs[4].ExternalId)
	}
	require.True(t, sees(r, []string{"group:hr"}))
	require.False(t, sees(r, []string{"group:legal"}))

	docs[4].Access = []string{"group:legal", "user:bob"}
	resp := mustIngest(t, r.client, docs...)
	require.Equal(t, int32(1), resp.DocumentsWritten, "only the access list changed")
	require.Zero(t, resp.ChunksWritten)
	gen1, queued1, embedded1, ids1 := state()
	require.Equal(t, ids0, ids1, "the same chunk rows")
	require.Equal(t, gen0, gen1, "no vector changed")
	require.Equal(t, queued0+embedded0, queued1+embedded1)
	var stale int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks
		WHERE access_key <> coalesce(array_to_string(access, E'\n'), '')`).Scan(&stale))
	require.Zero(t, stale, "chunks.access_key follows chunks.access (migration 00019's trigger)")
	require.True(t, sees(r, []string{"group:legal"}), "the writing replica applies it before answering")
	require.False(t, sees(r, []string{"group:hr"}))
	require.Eventually(t, func() bool { return sees(other, []string{"group:legal"}) && !sees(other, []string{"group:hr"}) },
		30*time.Second, 10*time.Millisecond, "the other replica follows the change feed")
}

// TestIngestRefusesAnUnknownAccessEntry: the stream ends at the bad
// document, naming it, and the document is not stored.
func TestIngestRefusesAnUnknownAccessEntry(t *testing.T) {
	r, pool := start(t)
	bad := txt("bad-doc", "Bad", "a document whose access list is wrong")
	bad.Access = []string{"group:hr", "administrators"}
	_, err := ingestDocs(t, r.client, bad)
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), `"bad-doc"`)
	require.True(t, strings.Contains(status.Convert(err).Message(), `"administrators"`), "%v", err)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM documents WHERE external_id = 'bad-doc'`).Scan(&n))
	require.Zero(t, n)
}

// gaugeValue reads a gauge of the replica's registry.
func gaugeValue(t *testing.T, r *replica, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestIndexStatusHidesUnreadableChanges: every figure of GetIndexStatus
// that moves when any document is written (the change counter and time;
// the model's identity and age, which a retrain after any ingest changes;
// its term coverage and whether a retrain is due) is withheld from a caller
// who may not read all of the corpus; otherwise it would tell that caller
// when a document it may not read was written. What such a caller gets is
// listed (a new field is withheld until it is added here); a caller who
// reads everything still gets them all.
func TestIndexStatusHidesUnreadableChanges(t *testing.T) {
	r, _ := start(t)
	docs, _ := accessCorpus(48)
	mustIngest(t, r.client, docs...)
	ctx := context.Background()
	status := func(scope *searchv1.ReadScope) *searchv1.GetIndexStatusResponse {
		st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{Scope: scope})
		require.NoError(t, err)
		return st
	}
	// Counted within the scope, or the service's configuration: neither
	// moves with a document the caller may not read.
	shownToScoped := map[protoreflect.Name]bool{"documents": true, "chunks": true,
		"embedder_provider": true, "embedder_dimensions": true}
	requireOnlyScopedFields := func(st *searchv1.GetIndexStatusResponse, name string) {
		t.Helper()
		st.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			require.True(t, shownToScoped[fd.Name()], "%s: %s = %v is shown to a limited scope", name, fd.Name(), v)
			return true
		})
		require.Positive(t, st.Documents, name)
	}
	scopes := []struct {
		name  string
		scope *searchv1.ReadScope
	}{
		{"an access set", &searchv1.ReadScope{Access: []string{"everyone", "group:hr"}}},
		{"a category scope", &searchv1.ReadScope{Categories: []string{"cloud", "data"}}},
	}
	before := status(nil)
	require.Positive(t, before.IndexGeneration)
	require.NotNil(t, before.LastChangeAt)
	require.NotNil(t, before.ModelTrainedAt, "the first ingest trained the builtin model")
	require.NotEmpty(t, before.EmbedderModel)
	require.Positive(t, before.ModelTermCoverage)
	for _, tc := range scopes {
		requireOnlyScopedFields(status(tc.scope), tc.name)
	}

	// A document only legal may read, in a category neither scope holds.
	secret := md("security/legal-only.md", "security", "Legal only", "# Legal only\n\nA settlement under negotiation.\n")
	secret.Access = []string{"group:legal"}
	mustIngest(t, r.client, secret)
	after := status(nil)
	require.Greater(t, after.IndexGeneration, before.IndexGeneration, "a caller who reads everything sees the write")
	for _, tc := range scopes {
		requireOnlyScopedFields(status(tc.scope), tc.name)
	}
}
