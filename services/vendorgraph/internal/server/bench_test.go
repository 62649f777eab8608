package server_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/synth"
)

// benchGraph imports a synthetic graph with the full-scale per-vendor shape
// (200 entities, 1,000 relationships per vendor) but fewer vendors, and
// returns vendor names whose neighbourhood fills 100 entities / 500
// relationships.
func benchGraph(b *testing.B, cacheSize int) (*replica, []string) {
	b.Helper()
	pool := newDB(b)
	cfg := server.DefaultConfig()
	cfg.CacheSize = cacheSize
	rep := startReplica(b, pool, cfg)
	p := synth.Params{Vendors: 30, Entities: 30 * 200, Relationships: 30 * 1000, Seed: 1}
	var buf bytes.Buffer
	require.NoError(b, synth.Write(&buf, p))
	var lines []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	mustImport(b, rep.client, lines)
	_, err := pool.Exec(b.Context(), "ANALYZE")
	require.NoError(b, err)
	var names []string
	for i := 0; i < p.Vendors; i++ {
		resp, err := rep.client.GetVendor(b.Context(), &vendorgraphv1.GetVendorRequest{Name: synth.VendorName(i), MaxEntities: 100, MaxRelationships: 500})
		require.NoError(b, err)
		if resp.GetStatistics().GetEntityCount() >= 100 && resp.GetStatistics().GetRelationshipCount() >= 500 {
			names = append(names, resp.GetVendorName())
		}
	}
	require.NotEmpty(b, names)
	return rep, names
}

func benchmarkGetVendor(b *testing.B, cacheSize int, wantHit bool) {
	rep, names := benchGraph(b, cacheSize)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		resp, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: names[i%len(names)], MaxEntities: 100, MaxRelationships: 500})
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetCacheHit() != wantHit || len(resp.GetEntities()) != 100 || len(resp.GetRelationships()) != 500 {
			b.Fatalf("cache_hit %v, %d entities, %d relationships", resp.GetCacheHit(), len(resp.GetEntities()), len(resp.GetRelationships()))
		}
		i++
	}
}

// BenchmarkGetVendorUncached measures GetVendor 100/500 through gRPC with the
// cache off: every call runs the queries.
func BenchmarkGetVendorUncached(b *testing.B) { benchmarkGetVendor(b, 0, false) }

// BenchmarkGetVendorCached measures GetVendor 100/500 through gRPC served
// from the cache.
func BenchmarkGetVendorCached(b *testing.B) { benchmarkGetVendor(b, 1000, true) }
