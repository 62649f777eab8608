package server_test

import (
	"context"
	"testing"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// BenchmarkCachedSearch is one hybrid search answered from the ranked-list
// cache, through the replica's real gRPC server and client on loopback:
// what a call costs outside ranking (transport, interceptors, the page).
func BenchmarkCachedSearch(b *testing.B) {
	pool, _ := newDB(b)
	r := startReplica(b, pool, testConfig())
	mustIngest(b, r.client, corpus(12)...)
	ctx := context.Background()
	req := &searchv1.SearchRequest{Query: "firewall audit", Limit: 10}
	if resp := search(b, r.client, req); len(resp.Results) == 0 {
		b.Fatal("no results")
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := r.client.Search(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if !resp.CacheHit {
			b.Fatal("not a cache hit")
		}
	}
}
