package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/pg"
)

// A document ingested through one replica is searchable on another within
// 2 s, and so is its deletion; the other replica also loads the model.
func TestFreshnessAcrossReplicas(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.PollInterval = time.Second
	a := startReplica(t, pool, cfg)
	b := startReplica(t, pool, cfg)
	mustIngest(t, a.client, corpus(20)...)

	visible := func(c searchv1.SearchServiceClient, q string) bool {
		out := search(t, c, &searchv1.SearchRequest{Query: q, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, NoCache: true, Limit: 5})
		return len(out.Results) > 0
	}
	// Warm b's cache with the query, to check invalidation too.
	require.False(t, search(t, b.client, &searchv1.SearchRequest{Query: "okapi marmalade", Limit: 5}).CacheHit)

	t0 := time.Now()
	mustIngest(t, a.client, md("fresh.md", "data", "Fresh", "# Fresh\n\nOkapi marmalade recipe."))
	require.True(t, visible(a.client, "okapi marmalade"), "the ingesting replica sees its write when the stream is answered")
	require.Eventually(t, func() bool { return visible(b.client, "okapi marmalade") }, 2*time.Second, 10*time.Millisecond)
	t.Logf("visible on the other replica after %s", time.Since(t0))
	cached := search(t, b.client, &searchv1.SearchRequest{Query: "okapi marmalade", Limit: 5})
	require.NotEmpty(t, cached.Results, "the cached empty list was invalidated")

	stA, err := a.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		stB, err := b.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
		return err == nil && stB.EmbedderModel == stA.EmbedderModel && stB.IndexGeneration == stA.IndexGeneration && stB.Chunks == stA.Chunks
	}, 2*time.Second, 10*time.Millisecond)
	out := search(t, b.client, &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, Limit: 5})
	require.NotEmpty(t, out.Results, "the other replica embeds queries with the trained model")

	_, err = a.client.DeleteDocument(context.Background(), &searchv1.DeleteDocumentRequest{ExternalId: "fresh.md"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !visible(b.client, "okapi marmalade") }, 2*time.Second, 10*time.Millisecond)
}

// The poll alone (no notification) keeps a replica fresh: changes made by
// another process straight in the database, without NOTIFY, show up.
func TestPollFallback(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.PollInterval = 500 * time.Millisecond
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(4)...)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE chunks SET text = 'quokka sighting' WHERE id = (SELECT min(id) FROM chunks)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE documents SET generation = nextval('search_generation') WHERE id = (SELECT document_id FROM chunks WHERE id = (SELECT min(id) FROM chunks))`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out := search(t, r.client, &searchv1.SearchRequest{Query: "quokka", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, NoCache: true, Limit: 5})
		return len(out.Results) == 1
	}, 2*time.Second, 20*time.Millisecond)
}

// proxy forwards TCP to PostgreSQL and can cut the link, to play a
// database that goes away and comes back. Its listener stays open the whole
// test (closing it and listening again on its port would race other
// listeners for that port): while cut, it closes each connection at once.
type proxy struct {
	t      *testing.T
	lis    net.Listener
	addr   string
	mu     sync.Mutex
	target string
	conns  []net.Conn
	down   bool
}

func newProxy(t *testing.T, target string) *proxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{t: t, target: target, lis: lis, addr: lis.Addr().String()}
	t.Cleanup(func() {
		_ = lis.Close()
		p.cut()
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down, target := p.down, p.target
			p.mu.Unlock()
			if down {
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

// cut closes every connection, and new ones from now on: the database is
// gone.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// restore forwards new connections again, to target.
func (p *proxy) restore(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.target = false, target
}

func TestDatabaseDownIsUnavailableFastAndRecovers(t *testing.T) {
	_, dbURL := newDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	dbHost := u.Host
	px := newProxy(t, dbHost)
	u.Host = px.addr
	ctx := context.Background()
	pool, err := pg.Connect(ctx, pg.Config{URL: u.String(), MaxConns: 8, ConnectTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := startReplica(t, pool, testConfig())
	mustIngest(t, r.client, corpus(12)...)
	// Vector search must really reach the database below: wait until the
	// embedding model is live on this replica.
	require.Eventually(t, func() bool {
		out := search(t, r.client, &searchv1.SearchRequest{Query: "cloud billing", Limit: 5, NoCache: true,
			Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR})
		return len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond)
	cachedReq := &searchv1.SearchRequest{Query: "security audit", Limit: 5}
	search(t, r.client, cachedReq)

	px.cut()
	// The feed's listener hears the cut at once; from then on the vector
	// mirror does not answer (it would not hear of new vectors), so the
	// vector side needs the database.
	require.Eventually(t, func() bool { return !r.svc.Listening() }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, gaugeValue(t, r, "bmcis_search_feed_listening"), "operators see it")
	for _, req := range []*searchv1.SearchRequest{
		{Query: "cloud billing", Limit: 5, NoCache: true},
		{Query: "cloud billing", Limit: 5, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR},
	} {
		// UNAVAILABLE, not DEADLINE_EXCEEDED: the service answered by itself
		// before the caller's deadline.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.client.Search(cctx, req)
		cancel()
		require.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = r.client.GetChunks(cctx, &searchv1.GetChunksRequest{ChunkIds: []int64{987654}})
	cancel()
	require.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
	_, err = ingestDocs(t, r.client, md("x.md", "", "X", "# X\n\nsomething new"))
	require.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
	// Cached lists need no database.
	require.True(t, search(t, r.client, cachedReq).CacheHit)

	px.restore(dbHost)
	require.Eventually(t, func() bool {
		_, err := r.client.Search(ctx, &searchv1.SearchRequest{Query: "cloud billing", Limit: 5, NoCache: true})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the service recovers by itself")
	mustIngest(t, r.client, md("y.md", "", "Y", "# Y\n\nwombat census"))
	require.Len(t, search(t, r.client, &searchv1.SearchRequest{Query: "wombat", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 5}).Results, 1)
	// The feed listener reconnected too.
	require.Eventually(t, r.svc.Listening, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, gaugeValue(t, r, "bmcis_search_feed_listening"))
}

func TestDatabaseHangIsUnavailableWithinTheTimeout(t *testing.T) {
	_, dbURL := newDB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	// A listener that accepts and never answers, like a frozen server.
	bh, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = bh.Close() })
	go func() {
		for {
			c, err := bh.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	px := newProxy(t, u.Host)
	u.Host = px.addr
	ctx := context.Background()
	pool, err := pg.Connect(ctx, pg.Config{URL: u.String(), MaxConns: 8, ConnectTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := startReplica(t, pool, testConfig())
	mustIngest(t, r.client, corpus(8)...)
	// Every connection is cut and new ones reach the frozen server.
	px.cut()
	px.restore(bh.Addr().String())
	pool.Reset()
	require.Eventually(t, func() bool { return !r.svc.Listening() }, 10*time.Second, 5*time.Millisecond,
		"the listener heard the cut: the vector side needs the database")
	// The service's database timeout fires: UNAVAILABLE, well before the
	// caller's own deadline (which would answer DEADLINE_EXCEEDED).
	cfg := testConfig()
	cctx, cancel := context.WithTimeout(ctx, 20*cfg.DBTimeout)
	defer cancel()
	_, err = r.client.Search(cctx, &searchv1.SearchRequest{Query: "cloud billing", Limit: 5, NoCache: true})
	require.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
	fmt.Println()
}
