package server_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
)

// TestBenchAccess100k measures what access lists cost a hybrid query: the
// synthetic 100k-chunk corpus (bmcisctl bench's) with every document in
// one of 20 groups (or, second, half of them everyone's), queried
// uncached by a caller in 2 groups and by an unrestricted one, the two
// interleaved query by query so both see the same machine load.
//
//	BMCIS_EVAL_BENCH=1 go test ./internal/server -run TestBenchAccess100k -v -timeout 60m
func TestBenchAccess100k(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_BENCH") == "" {
		t.Skip("set BMCIS_EVAL_BENCH=1 to run the 100k-chunk access-list benchmark")
	}
	const groups, target, nq, rounds = 20, 100_000, 500, 2
	pool, _ := newDB(t)
	r := startReplica(t, pool, testConfig())
	g := syntheticdocs.New(1, 30_000)
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	var docs []*searchv1.Document
	for n := 0; n < target; {
		d := g.Document(len(docs))
		cs, err := ck.Split(t.Context(), chunker.Markdown, d.Title, string(d.Content))
		require.NoError(t, err)
		n += len(cs)
		docs = append(docs, d)
	}
	restrictAll := func() {
		for i, d := range docs {
			d.Access = []string{fmt.Sprintf("group:g%02d", i%groups)}
		}
	}
	restrictAll()
	t0 := time.Now()
	resp := ingestLong(t, r.client, docs)
	t.Logf("machine: %d CPUs; load average %s", runtime.NumCPU(), loadAverage())
	t.Logf("ingested %d documents, %d chunks, in %.1f s", resp.DocumentsWritten, resp.ChunksWritten, time.Since(t0).Seconds())

	queries := make([]string, nq)
	for i := range queries {
		queries[i] = g.Query(i)
	}
	caller := []string{"everyone", "group:g03", "group:g11"}
	measure := func(name string) {
		var open, restricted []float64
		var shortPages int
		// Seconds per stage (bmcis_search_stage_seconds), summed per caller:
		// where the difference goes.
		stages := map[bool]map[string]float64{false: {}, true: {}}
		for range rounds {
			for _, q := range queries {
				for _, scope := range []*searchv1.ReadScope{nil, {Access: caller}} {
					before := stageSums(t, r)
					start := time.Now()
					out := search(t, r.client, &searchv1.SearchRequest{Query: q, Limit: 10, NoCache: true, Scope: scope})
					ms := float64(time.Since(start).Microseconds()) / 1000
					for k, v := range stageSums(t, r) {
						stages[scope != nil][k] += v - before[k]
					}
					if scope == nil {
						open = append(open, ms)
						continue
					}
					restricted = append(restricted, ms)
					if len(out.Results) < 10 && int(out.TotalAvailable) > len(out.Results) {
						shortPages++
					}
				}
			}
		}
		p50o, p95o := percentile(open, 50), percentile(open, 95)
		p50r, p95r := percentile(restricted, 50), percentile(restricted, 95)
		t.Logf("%s: %d queries each, load average %s", name, len(open), loadAverage())
		t.Logf("| caller | P50 ms | P95 ms |\n|---|---|---|\n| unrestricted | %.2f | %.2f |\n| 2 of %d groups | %.2f | %.2f |\nratio of P50s: %.2f; short pages: %d",
			p50o, p95o, groups, p50r, p95r, p50r/p50o, shortPages)
		for _, k := range []string{"bm25", "embed", "feedback", "vector"} {
			t.Logf("stage %s: mean %.3f ms unrestricted, %.3f ms restricted", k,
				stages[false][k]*1000/float64(len(open)), stages[true][k]*1000/float64(len(restricted)))
		}
		require.Zero(t, shortPages, "filtering inside candidate generation never returns a short page")
	}
	measure("every document in one of 20 groups (the caller reads 10%)")

	// Half the documents become everyone's: an access-only change, which
	// rewrites no chunk.
	for i, d := range docs {
		if i%2 == 0 {
			d.Access = nil
		}
	}
	t0 = time.Now()
	resp = ingestLong(t, r.client, docs)
	t.Logf("access change of %d documents in %.1f s, %d chunks written", resp.DocumentsWritten, time.Since(t0).Seconds(), resp.ChunksWritten)
	require.Zero(t, resp.ChunksWritten)
	measure("half everyone's, half in one of 20 groups (the caller reads 55%)")
}

// ingestLong is mustIngest without its 5-minute bound: a 100k-chunk load
// with its embedding takes longer on a loaded machine.
func ingestLong(t *testing.T, c searchv1.SearchServiceClient, docs []*searchv1.Document) *searchv1.IngestDocumentsResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	stream, err := c.IngestDocuments(ctx)
	require.NoError(t, err)
	for _, d := range docs {
		require.NoError(t, stream.Send(&searchv1.IngestDocumentsRequest{Document: d}))
	}
	resp, err := stream.CloseAndRecv()
	require.NoError(t, err)
	return resp
}

func percentile(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// stageSums reads the replica's bmcis_search_stage_seconds sums by stage.
func stageSums(t *testing.T, r *replica) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "bmcis_search_stage_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" {
					out[l.GetValue()] = m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return out
}
