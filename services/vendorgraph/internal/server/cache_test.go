package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

func TestCacheHitsAndKeys(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	get := func(req *vendorgraphv1.GetVendorRequest) *vendorgraphv1.GetVendorResponse {
		t.Helper()
		resp, err := rep.client.GetVendor(ctx, req)
		require.NoError(t, err)
		return resp
	}
	first := get(&vendorgraphv1.GetVendorRequest{Name: "Acme Corp"})
	require.False(t, first.GetCacheHit())
	second := get(&vendorgraphv1.GetVendorRequest{Name: "Acme Corp"})
	require.True(t, second.GetCacheHit())
	second.CacheHit = false
	require.True(t, proto.Equal(first, second), "a cached reply is the same reply")

	require.True(t, get(&vendorgraphv1.GetVendorRequest{Name: " ACME corp. "}).GetCacheHit(), "same normalized name, same entry")
	require.True(t, get(&vendorgraphv1.GetVendorRequest{Name: "Acme Corp", MaxEntities: 5, MaxRelationships: 5}).GetCacheHit(), "0 and 5 are the same caps")

	no, two := false, int32(2)
	for _, req := range []*vendorgraphv1.GetVendorRequest{
		{Name: "Acme Corp", MaxEntities: 100, MaxRelationships: 500},
		{Name: "Acme Corp", MaxEntities: 5, MaxRelationships: 6},
		{Name: "Acme Corp", IncludeRelationships: &no},
		{Name: "Acme Corp", Depth: two},
		{Name: "Acme Corporation"}, // the alias is its own entry
	} {
		require.False(t, get(req).GetCacheHit(), "%v", req)
		require.True(t, get(req).GetCacheHit(), "%v", req)
	}
}

func TestCacheInvalidatedByImport(t *testing.T) {
	pool := newDB(t)
	a := startReplica(t, pool, server.DefaultConfig())
	b := startReplica(t, pool, server.DefaultConfig()) // another replica, same database
	lines := readLines(t, demoFile)
	mustImport(t, a.client, lines)
	ctx := ctxT(t)
	req := &vendorgraphv1.GetVendorRequest{Name: "Initech", MaxEntities: 100, MaxRelationships: 500}
	for _, r := range []*replica{a, b} {
		// b may still be receiving the import's NOTIFY: a reply read before
		// it arrives is not stored, so the second call can miss once.
		require.Eventually(t, func() bool {
			_, err := r.client.GetVendor(ctx, req)
			require.NoError(t, err)
			hit, err := r.client.GetVendor(ctx, req)
			require.NoError(t, err)
			return hit.GetCacheHit()
		}, 5*time.Second, 10*time.Millisecond)
	}

	// An import that changes nothing keeps the cache.
	mustImport(t, a.client, lines)
	hit, err := a.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.True(t, hit.GetCacheHit())

	// A change made through replica a: a drops its cache at once, b when the
	// NOTIFY arrives.
	mustImport(t, a.client, []string{
		`{"kind":"entity","id":"initech-cloud","name":"Initech Cloud Ledger","entity_type":"PRODUCT","confidence":0.9}`,
		`{"kind":"relationship","source_id":"initech","target_id":"initech-cloud","relationship_type":"PRODUCES","confidence":0.9}`,
	})
	fresh, err := a.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.False(t, fresh.GetCacheHit())
	require.Equal(t, hit.GetStatistics().GetEntityCount()+1, fresh.GetStatistics().GetEntityCount())
	require.Eventually(t, func() bool {
		resp, err := b.client.GetVendor(ctx, req)
		return err == nil && !resp.GetCacheHit() && resp.GetStatistics().GetEntityCount() == fresh.GetStatistics().GetEntityCount()
	}, 5*time.Second, 10*time.Millisecond, "replica b kept serving its stale entry")
}

func TestCacheTTLAndDisabled(t *testing.T) {
	pool := newDB(t)
	cfg := server.DefaultConfig()
	cfg.CacheTTL = 300 * time.Millisecond
	short := startReplica(t, pool, cfg)
	cfg.CacheSize = 0
	off := startReplica(t, pool, cfg)
	mustImport(t, short.client, readLines(t, demoFile))
	ctx := ctxT(t)
	req := &vendorgraphv1.GetVendorRequest{Name: "Hooli"}

	for i := 0; i < 3; i++ {
		resp, err := off.client.GetVendor(ctx, req)
		require.NoError(t, err)
		require.False(t, resp.GetCacheHit(), "a disabled cache never hits")
	}
	_, err := short.client.GetVendor(ctx, req)
	require.NoError(t, err)
	resp, err := short.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.True(t, resp.GetCacheHit())
	time.Sleep(400 * time.Millisecond)
	resp, err = short.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.False(t, resp.GetCacheHit(), "expired after the TTL")
}

func TestErrorsAreNotCached(t *testing.T) {
	rep, _ := start(t)
	ctx := ctxT(t)
	_, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Late Vendor"})
	require.Error(t, err)
	mustImport(t, rep.client, []string{`{"kind":"entity","id":"late","name":"Late Vendor","entity_type":"COMPANY","confidence":1,"is_vendor":true}`})
	resp, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "late vendor"})
	require.NoError(t, err)
	require.Equal(t, "Late Vendor", resp.GetVendorName())
	require.Zero(t, resp.GetStatistics().GetEntityCount())
	require.False(t, strings.Contains(resp.String(), "cache_hit:true"))
}

func TestCacheOffWhileListenerIsDown(t *testing.T) {
	pool := newDB(t)
	rep := startReplica(t, pool, server.DefaultConfig())
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	req := &vendorgraphv1.GetVendorRequest{Name: "Stark Industries"}
	_, err := rep.client.GetVendor(ctx, req)
	require.NoError(t, err)
	hit, err := rep.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.True(t, hit.GetCacheHit())

	// Cut the LISTEN connection: the replica could now miss another
	// replica's import, so it must stop trusting its cache until it listens again.
	var killed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.True(t, killed)
	require.Eventually(t, func() bool { return !rep.svc.CacheLive() }, 5*time.Second, time.Millisecond)
	require.Eventually(t, rep.svc.CacheLive, 10*time.Second, 10*time.Millisecond, "listener never came back")
	resp, err := rep.client.GetVendor(ctx, req)
	require.NoError(t, err)
	require.False(t, resp.GetCacheHit(), "entries from before the outage were dropped")
}

// TestCacheBackSoonAfterDatabaseOutage: while the database refuses
// connections the listener keeps failing; once it accepts them again the
// cache must be live soon, however long the outage was (the listener's retry
// backoff stops growing at 500 ms). The bound, 4 s, is eight times that cap,
// room for a loaded machine; the outage (7 s) is long enough for an
// exponential backoff without a small cap (100 ms doubling: attempts at
// 6.3 s, then 12.7 s) to sleep well past it.
func TestCacheBackSoonAfterDatabaseOutage(t *testing.T) {
	pool := newDB(t)
	rep := startReplica(t, pool, server.DefaultConfig())
	ctx := ctxT(t)
	var db string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	admin, err := pgxpool.New(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	allow := func(on bool) {
		_, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, pgx.Identifier{db}.Sanitize(), on))
		require.NoError(t, err)
	}
	t.Cleanup(func() { allow(true) })

	allow(false) // new connections (the listener's included) are refused
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !rep.svc.CacheLive() }, 5*time.Second, time.Millisecond)
	time.Sleep(7 * time.Second) // the outage's length, not a wait for a condition
	allow(true)
	back := time.Now()
	require.Eventually(t, rep.svc.CacheLive, 10*time.Second, 10*time.Millisecond, "listener never came back")
	require.LessOrEqual(t, time.Since(back), 4*time.Second, "cache live again only %s after the database accepted connections", time.Since(back))
}
