package indexwatch_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/indexwatch"
)

// TestWatchTheRealSearch: a watcher on the search binary, with the
// adapter's credential, follows an ingest and a delete as soon as the
// replica applies them, stops being current when search stops and is
// current again once it is back.
func TestWatchTheRealSearch(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	addr := s.Addr(stacktest.Search)
	dial := func(token string) searchv1.SearchServiceClient {
		conn, err := grpcclient.Dial(addr, token)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return searchv1.NewSearchServiceClient(conn)
	}
	w, stop := indexwatch.Start(dial(stacktest.AdapterToken), nil)
	t.Cleanup(stop)
	operator := dial(stacktest.IngestToken)

	require.Eventually(t, func() bool { _, _, ok := w.Epoch(); return ok }, 5*time.Second, time.Millisecond, "current after start")
	epoch := func() uint64 { e, _, ok := w.Epoch(); require.True(t, ok); return e }

	// moved runs write and reports how long after it returned (search
	// has applied it on its replica by then) and after it was sent the
	// epoch moved. The push takes a few milliseconds on a quiet machine;
	// the bound is generous (a loaded 2-core CI box stalls goroutines for
	// hundreds of ms) and the time measured is logged, not asserted.
	moved := func(name string, write func(ctx context.Context) error) {
		t.Helper()
		before := epoch()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sent := time.Now()
		require.NoError(t, write(ctx))
		returned := time.Now()
		early := epoch() != before
		require.Eventually(t, func() bool { return epoch() != before }, 10*time.Second, 100*time.Microsecond,
			"%s: the epoch moves", name)
		at := time.Now()
		t.Logf("%s: epoch moved %.1f ms after it was sent; already when its reply came: %v (else %.1f ms after)",
			name, float64(at.Sub(sent).Microseconds())/1000, early, float64(at.Sub(returned).Microseconds())/1000)
	}
	moved("ingest", func(ctx context.Context) error {
		stream, err := operator.IngestDocuments(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(&searchv1.IngestDocumentsRequest{Document: &searchv1.Document{
			ExternalId: "watched", SourceFile: "watched.md", Title: "Watched",
			Content: []byte("# Watched\n\nA document the index watcher sees arrive."),
			Format:  searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN,
		}}); err != nil {
			return err
		}
		resp, err := stream.CloseAndRecv()
		if err == nil && resp.GetDocumentsWritten() != 1 {
			t.Errorf("written %d, want 1", resp.GetDocumentsWritten())
		}
		return err
	})
	moved("delete", func(ctx context.Context) error {
		_, err := operator.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "watched"})
		return err
	})

	// Heartbeats with an unchanged version keep the epoch: two more
	// messages (the first may be a push already under way) and no move.
	steady, heard := epoch(), w.Messages()
	require.Eventually(t, func() bool { return w.Messages() >= heard+2 }, 10*time.Second, 5*time.Millisecond, "heartbeats come")
	require.Equal(t, steady, epoch(), "no change, no move: heartbeats only")

	svc := s.Service(stacktest.Search)
	svc.Stop(t)
	// Search ends the stream as it begins to drain, so the watcher knows
	// about when the process is gone (the stream's end is read on gRPC's
	// own goroutine: a few milliseconds on a quiet machine, logged; the
	// bound is StaleAfter, what a silent stream would take, with room).
	stopped := time.Now()
	require.Eventually(t, func() bool { _, _, ok := w.Epoch(); return !ok }, 2*indexwatch.StaleAfter, time.Millisecond,
		"not current once search is stopped")
	t.Logf("not current %.1f ms after search stopped", float64(time.Since(stopped).Microseconds())/1000)

	svc.Start(t)
	require.Eventually(t, func() bool { _, _, ok := w.Epoch(); return ok }, 10*time.Second, 5*time.Millisecond, "current again once search is back")
	e, _, _ := w.Epoch()
	require.Equal(t, steady, e, "the same version as before the stop: the same epoch")
}

// TestWatchIsTheAdaptersAlone: another role (the read credential, which
// an adapter may hold) is refused; its watcher stops asking and is never
// current.
func TestWatchIsTheAdaptersAlone(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	conn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.ServiceToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	w := indexwatch.New(searchv1.NewSearchServiceClient(conn), nil, nil)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(context.Background()) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher kept asking after search refused it")
	}
	_, _, current := w.Epoch()
	require.False(t, current)
}

// olderSearch is a search service of a release before WatchIndex, as a
// new adapter meets it during a rolling upgrade: every RPC it does not
// know answers Unimplemented.
type olderSearch struct {
	searchv1.UnimplementedSearchServiceServer
}

// TestAnOlderSearchIsNotAskedEverySecond: against a search that does not
// know WatchIndex, the watcher waits unimplementedBackoff (30 s) between
// asks, not the 1 s of an outage, and the cache stays bypassed.
func TestAnOlderSearchIsNotAskedEverySecond(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var asks atomic.Int64
	srv := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		asks.Add(1)
		return h(srv, ss)
	}))
	searchv1.RegisterSearchServiceServer(srv, olderSearch{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	w, stop := indexwatch.Start(searchv1.NewSearchServiceClient(conn), nil)
	require.Eventually(t, func() bool { return asks.Load() >= 1 }, 10*time.Second, 10*time.Millisecond)
	// An outage's backoff would have asked again 3 or more times by now.
	time.Sleep(2500 * time.Millisecond)
	stop()
	require.Equal(t, int64(1), asks.Load(), "asked again within the unimplemented backoff")
	_, _, current := w.Epoch()
	require.False(t, current)
}
