package engine

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// rankGoldenFile holds a digest of every ranked list of
// TestRankingMatchesGolden. BMCIS_UPDATE_RANK_GOLDEN=1 rewrites it: only
// when a ranking is meant to change (the corpus generator, analyzer,
// model or fusion), never to make a speed-up pass.
const rankGoldenFile = "testdata/rank_golden.txt"

// TestRankingMatchesGolden ranks BenchmarkRankHybrid's corpus, cut at 2,000
// chunks, in each mode and compares every list with digests of the lists
// the code ranked before the speed-ups of issue 32 (rank5): the results
// and their order, every score's bits, ranks, score type, matched words and
// duplicate flags of every result, so every page of every list.
func TestRankingMatchesGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model: about 10 s")
	}
	if runtime.GOARCH != "amd64" {
		// The digests hold every score's bits as amd64 computes them; Go
		// may fuse a multiply and an add elsewhere (arm64), which moves
		// last bits.
		t.Skip("digests recorded on amd64")
	}
	e, queries, err := goldenRankEngine()
	require.NoError(t, err)
	queries = queries[:150]
	ctx := context.Background()
	var got []string
	for _, mode := range []Mode{BM25, Vector, Hybrid} {
		for i, q := range queries {
			rk, _, _, err := e.Search(ctx, Query{Text: q, Mode: mode, NoCache: true})
			require.NoError(t, err, "mode %d query %d %q", mode, i, q)
			got = append(got, fmt.Sprintf("%d %d %d %s", mode, i, len(rk.Results), rankedDigest(rk)))
		}
	}
	if os.Getenv("BMCIS_UPDATE_RANK_GOLDEN") == "1" {
		require.NoError(t, os.MkdirAll(filepath.Dir(rankGoldenFile), 0o755))
		require.NoError(t, os.WriteFile(rankGoldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644))
		return
	}
	f, err := os.Open(rankGoldenFile)
	require.NoError(t, err)
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i], got[i], "line %d: mode, query, results, digest", i+1)
	}
}

// rankedDigest is a SHA-256 of everything a page of rk can show.
func rankedDigest(rk *Ranked) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", rk.QueryTerms)
	for i, r := range rk.Results {
		dup, similar := rk.Duplicates(i)
		fmt.Fprintf(h, "%d %x %x %x %x %x %x %d %d %s %q %t %v\n", r.ChunkID,
			math.Float64bits(r.HybridScore), math.Float64bits(r.BM25Score), math.Float64bits(r.SimilarityScore),
			math.Float64bits(r.Fused), math.Float64bits(r.RawBM25), math.Float64bits(r.Cosine),
			r.BM25Rank, r.VectorRank, r.ScoreType, rk.MatchedWords(i), dup, similar)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// goldenRankEngine is TestRankingMatchesGolden's engine, BenchmarkRankHybrid's
// corpus cut at 2,000 chunks, trained once for the tests that share it.
func goldenRankEngine() (*Engine, []string, error) {
	r := goldenRank()
	return r.e, r.queries, r.err
}

var goldenRank = sync.OnceValue(func() (r struct {
	e       *Engine
	queries []string
	err     error
}) {
	r.e, r.queries, r.err = newRankBenchEngine(2_000)
	return r
})

// When the mirror lacks one of the feedback hits' vectors, their vectors
// are embedded from the texts the replica keeps (rank5 builds those texts
// only then): one per hit, in the hits' order, the vectors the mirror
// holds, since it holds those texts embedded by the same model. The golden
// lists never take this path: their mirror holds every vector.
func TestFeedbackEmbedsTextsWhenMirrorLacksVectors(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model: about 10 s")
	}
	e, _, err := goldenRankEngine()
	require.NoError(t, err)
	ctx := context.Background()
	active := e.emb.Current()
	ids := []int64{3, 1, 40, 7, 12}
	fb := feedbackHits{ids: ids}
	for _, c := range e.ix.Chunks(ids) {
		require.NotNil(t, c)
		require.False(t, c.TextInDatabase)
		fb.texted = append(fb.texted, c)
	}
	fromMirror := e.feedbackVectors(ctx, active, fb)
	require.Len(t, fromMirror, len(ids))
	unmirrored := *active
	unmirrored.Row = active.Row + 1 // a model the mirror holds no vector of
	_, missing := e.mirroredVectors(unmirrored.Row, ids)
	require.Equal(t, ids, missing, "the fallback is taken")
	fromTexts := e.feedbackVectors(ctx, &unmirrored, fb)
	require.Len(t, fromTexts, len(ids))
	for i := range ids {
		require.InDeltaSlice(t, fromMirror[i], fromTexts[i], 1e-6, "hit %d", ids[i])
	}
}
