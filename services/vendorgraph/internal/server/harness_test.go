package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

const token = "vendorgraph-test-token-0123456789"

const demoFile = "../../demo/demo-graph.jsonl"

// replica is one running service on a test database, reached over loopback
// gRPC through grpcserver's interceptor chain.
type replica struct {
	client vendorgraphv1.VendorGraphServiceClient
	svc    *server.Server
}

// newDB returns a fresh migrated database.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := testdb.New(t)
	return pool
}

// startReplica serves a vendorgraph Server on pool, with no search (the
// names an import changes go nowhere), and waits until its cache listens
// for changes.
func startReplica(t testing.TB, pool *pgxpool.Pool, cfg server.Config) *replica {
	t.Helper()
	return startReplicaWith(t, pool, cfg, nil)
}

// startSearch runs the search service (the real binary) on the database
// at dbURL and returns a client holding vendorgraph's credential.
func startSearch(t testing.TB, dbURL string) searchv1.SearchServiceClient {
	t.Helper()
	stack := stacktest.Start(t, stacktest.Options{DatabaseURL: dbURL, Services: []string{stacktest.Search}})
	conn, err := grpcclient.Dial(stack.Addr(stacktest.Search), stacktest.VendorGraphToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return searchv1.NewSearchServiceClient(conn)
}

// startReplicaWith is startReplica sending the names an import changes to
// search.
func startReplicaWith(t testing.TB, pool *pgxpool.Pool, cfg server.Config, search searchv1.SearchServiceClient) *replica {
	t.Helper()
	srv := grpcserver.New(grpcserver.Settings{
		Name: "vendorgraph-test", LogLevel: "error", Credentials: rpcauth.AllRoles(token),
		ShutdownTimeout: 5 * time.Second,
	}, grpcserver.WithLogOutput(io.Discard), grpcserver.WithClassifier(pg.ClassifyError))
	svc := server.New(pool, cfg, search)
	vendorgraphv1.RegisterVendorGraphServiceServer(srv.GRPC(), svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() { defer close(watched); svc.WatchChanges(ctx, srv.Logger()) }()
	go func() { defer close(done); _ = srv.Serve(ctx, lis) }()
	conn, err := grpcclient.Dial(lis.Addr().String(), token)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-done
		<-watched
	})
	if cfg.CacheSize > 0 {
		require.Eventually(t, svc.CacheLive, 5*time.Second, 5*time.Millisecond, "cache never started listening")
	}
	return &replica{client: vendorgraphv1.NewVendorGraphServiceClient(conn), svc: svc}
}

// start is a fresh database with one replica on it.
func start(t testing.TB) (*replica, *pgxpool.Pool) {
	t.Helper()
	pool := newDB(t)
	return startReplica(t, pool, server.DefaultConfig()), pool
}

// importLines streams lines numbered from 1.
func importLines(t testing.TB, c vendorgraphv1.VendorGraphServiceClient, lines []string) (*vendorgraphv1.ImportGraphResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := c.ImportGraph(ctx)
	require.NoError(t, err)
	for i, l := range lines {
		if err := stream.Send(&vendorgraphv1.ImportGraphRequest{LineNumber: int64(i + 1), Line: l}); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server answered early; CloseAndRecv has the status
			}
			require.NoError(t, err)
		}
	}
	return stream.CloseAndRecv()
}

func mustImport(t testing.TB, c vendorgraphv1.VendorGraphServiceClient, lines []string) *vendorgraphv1.ImportGraphResponse {
	t.Helper()
	resp, err := importLines(t, c, lines)
	require.NoError(t, err)
	return resp
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	require.NoError(t, sc.Err())
	return out
}

// detail extracts the one typed detail of type D from err.
func detail[D any](t testing.TB, err error) D {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status error: %v", err)
	for _, d := range st.Details() {
		if v, ok := d.(D); ok {
			return v
		}
	}
	var zero D
	t.Fatalf("no %T detail in %v", zero, err)
	return zero
}

func requireCode(t testing.TB, err error, code codes.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "error: %v", err)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
