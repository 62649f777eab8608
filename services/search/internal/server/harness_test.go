package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

// token holds every role but read, which readToken holds alone: what the
// service shows only to some roles (ListSources' roots) is tested with both.
const (
	token     = "search-test-token-0123456789"
	readToken = "search-test-read-token-0123456789"
)

func testCredentials() rpcauth.Credentials {
	creds := rpcauth.AllRoles(token)
	creds[rpcauth.Read] = rpcauth.DigestOf(readToken)
	return creds
}

// replica is one running service on a test database, reached over loopback
// gRPC through grpcserver's interceptor chain.
type replica struct {
	client searchv1.SearchServiceClient
	addr   string
	svc    *server.Server
	reg    *prometheus.Registry
}

func testConfig() server.Config {
	cfg := server.DefaultConfig()
	cfg.PollInterval = 200 * time.Millisecond
	cfg.SweepInterval = time.Hour
	return cfg
}

// newDB returns a fresh migrated database.
func newDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return testdb.New(t)
}

// startReplica serves a search Server on pool.
func startReplica(t testing.TB, pool *pgxpool.Pool, cfg server.Config) *replica {
	t.Helper()
	r, err := tryStartReplica(t, pool, cfg)
	require.NoError(t, err)
	return r
}

func tryStartReplica(t testing.TB, pool *pgxpool.Pool, cfg server.Config) (*replica, error) {
	t.Helper()
	srv := grpcserver.New(grpcserver.Settings{
		Name: "search-test", LogLevel: "error", Credentials: testCredentials(), ShutdownTimeout: 5 * time.Second,
	}, grpcserver.WithLogOutput(testLogOut), grpcserver.WithClassifier(pg.ClassifyError))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := server.Open(ctx, pool, cfg, srv.Logger(), srv.Registry())
	if err != nil {
		return nil, err
	}
	searchv1.RegisterSearchServiceServer(srv.GRPC(), svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	ran := make(chan struct{})
	go func() { defer close(ran); svc.Run(runCtx) }()
	go func() { <-runCtx.Done(); svc.EndWatches() }()
	go func() { defer close(done); _ = srv.Serve(runCtx, lis) }()
	conn, err := grpcclient.Dial(lis.Addr().String(), token)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		stop()
		<-done
		<-ran
	})
	require.Eventually(t, svc.Listening, 5*time.Second, 5*time.Millisecond, "change feed never started listening")
	reg, _ := srv.Registry().(*prometheus.Registry)
	return &replica{client: searchv1.NewSearchServiceClient(conn), addr: lis.Addr().String(), svc: svc, reg: reg}, nil
}

// start is a fresh database with one replica on it.
func start(t testing.TB) (*replica, *pgxpool.Pool) {
	t.Helper()
	pool, _ := newDB(t)
	return startReplica(t, pool, testConfig()), pool
}

func md(id, category, title, body string) *searchv1.Document {
	return &searchv1.Document{ExternalId: id, SourceFile: id, Category: category, Title: title,
		Content: []byte(body), Format: searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN}
}

func txt(id, title, body string) *searchv1.Document {
	return &searchv1.Document{ExternalId: id, SourceFile: "corpus.jsonl", Title: title,
		Content: []byte(body), Format: searchv1.ContentFormat_CONTENT_FORMAT_TEXT}
}

func withTime(d *searchv1.Document, ts time.Time) *searchv1.Document {
	d.UpdatedAt = timestamppb.New(ts)
	return d
}

func ingestDocs(t testing.TB, c searchv1.SearchServiceClient, docs ...*searchv1.Document) (*searchv1.IngestDocumentsResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := c.IngestDocuments(ctx)
	require.NoError(t, err)
	for _, d := range docs {
		if err := stream.Send(&searchv1.IngestDocumentsRequest{Document: d}); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
		}
	}
	return stream.CloseAndRecv()
}

func mustIngest(t testing.TB, c searchv1.SearchServiceClient, docs ...*searchv1.Document) *searchv1.IngestDocumentsResponse {
	t.Helper()
	resp, err := ingestDocs(t, c, docs...)
	require.NoError(t, err)
	return resp
}

func search(t testing.TB, c searchv1.SearchServiceClient, req *searchv1.SearchRequest) *searchv1.SearchResponse {
	t.Helper()
	if req.Limit == 0 {
		req.Limit = 50
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Search(ctx, req)
	require.NoError(t, err)
	return resp
}

func requireCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "error: %v", err)
}

func docIDs(resp *searchv1.SearchResponse) []string {
	var out []string
	for _, r := range resp.Results {
		out = append(out, r.Chunk.DocumentId)
	}
	return out
}

// corpus is a small multi-topic corpus big enough to train the builtin
// embedder: n documents over a few topics, each with its own category.
func corpus(n int) []*searchv1.Document {
	topics := []struct{ cat, words string }{
		{"security", "security incident vulnerability patch firewall threat audit encryption breach attacker"},
		{"authentication", "authentication login password token session oauth saml identity credential mfa"},
		{"cloud", "cloud aws azure gcp region network subnet account billing compute storage"},
		{"data", "data warehouse pipeline kafka schema table query retention backup analytics"},
	}
	var docs []*searchv1.Document
	for i := 0; i < n; i++ {
		tp := topics[i%len(topics)]
		body := fmt.Sprintf("# Doc %d\n\n## Overview\n\nThis page about %s covers item%d and shared words. %s %s.\n\n## Details\n\nMore on %s for team%d.\n",
			i, tp.cat, i, tp.words, tp.words, tp.words, i%7)
		docs = append(docs, md(fmt.Sprintf("%s/doc-%03d.md", tp.cat, i), tp.cat, fmt.Sprintf("Doc %d", i), body))
	}
	return docs
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var testLogOut io.Writer = io.Discard

// awaitMirror waits until r's vector mirror answers an uncached vector
// query. Until then pgvector answers, and its cosines differ from the
// mirror's in the last float32 bits, so a test comparing scores of two
// uncached searches must not straddle the switch.
func awaitMirror(t *testing.T, r *replica, query string) {
	t.Helper()
	mirrorAnswers := func() float64 { return counter(t, r.reg, "bmcis_search_vector_path_total", "path", "mirror") }
	require.Eventually(t, func() bool {
		before := mirrorAnswers()
		resp, err := r.client.Search(context.Background(), &searchv1.SearchRequest{
			Query: query, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 5})
		return err == nil && len(resp.Results) > 0 && mirrorAnswers() > before
	}, 30*time.Second, 20*time.Millisecond, "the mirror answers once built")
}
