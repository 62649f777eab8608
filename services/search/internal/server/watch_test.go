package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/answerversion"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

// watch opens a WatchIndex stream on r, ended with the test.
func watch(t *testing.T, r *replica) grpc.ServerStreamingClient[searchv1.IndexVersion] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := r.client.WatchIndex(ctx, &searchv1.WatchIndexRequest{})
	require.NoError(t, err)
	return stream
}

// nextVersion is the stream's next message, which must come within d.
func nextVersion(t *testing.T, stream grpc.ServerStreamingClient[searchv1.IndexVersion], d time.Duration) *searchv1.IndexVersion {
	t.Helper()
	type got struct {
		v   *searchv1.IndexVersion
		err error
	}
	ch := make(chan got, 1)
	go func() { v, err := stream.Recv(); ch <- got{v, err} }()
	select {
	case g := <-ch:
		require.NoError(t, g.err)
		return g.v
	case <-time.After(d):
		t.Fatalf("no message within %s", d)
		return nil
	}
}

// untilVersion reads the stream until a version satisfies want, each
// message within 100 ms: a change is pushed at once, and messages before
// it (a heartbeat, a vectors or model change of an earlier write) come
// no later.
func untilVersion(t *testing.T, stream grpc.ServerStreamingClient[searchv1.IndexVersion], want func(*searchv1.IndexVersion) bool) *searchv1.IndexVersion {
	t.Helper()
	for range 10 {
		if v := nextVersion(t, stream, 100*time.Millisecond); want(v) {
			return v
		}
	}
	t.Fatal("the change was not pushed")
	return nil
}

// TestWatchIndex: the version at once, a new one when the replica applies
// an ingest or a delete, heartbeats meanwhile; two replicas at the same
// point send equal versions.
func TestWatchIndex(t *testing.T) {
	r, pool := start(t)
	stream := watch(t, r)
	first := nextVersion(t, stream, time.Second)

	// Nothing changes: heartbeats, at least one a second, the same version.
	hb := nextVersion(t, stream, 1500*time.Millisecond)
	require.True(t, proto.Equal(first, hb), "a heartbeat repeats the version")

	_, err := ingestDocs(t, r.client, md("watched.md", "", "Watched", "# Watched\n\nA document the stream reports."))
	require.NoError(t, err)
	// The replica applied the ingest before it answered, and pushed then
	// (a heartbeat sent before may come first).
	afterIngest := untilVersion(t, stream, func(v *searchv1.IndexVersion) bool {
		return v.GetIndexGeneration() > first.GetIndexGeneration()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = r.client.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "watched.md"})
	require.NoError(t, err)
	untilVersion(t, stream, func(v *searchv1.IndexVersion) bool {
		return v.GetIndexGeneration() > afterIngest.GetIndexGeneration()
	})

	// A second replica on the same database, caught up: the same version.
	other := startReplica(t, pool, testConfig())
	for deadline := time.Now().Add(5 * time.Second); ; {
		theirs := nextVersion(t, watch(t, other), time.Second)
		mine := nextVersion(t, watch(t, r), time.Second)
		if proto.Equal(theirs, mine) {
			break
		}
		require.True(t, time.Now().Before(deadline), "two replicas at one point send different versions: %v, %v", theirs, mine)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatchIndexEnds: at shutdown (EndWatches) the streams end UNAVAILABLE
// and new ones are refused; only the adapter role may watch.
func TestWatchIndexEnds(t *testing.T) {
	r, _ := start(t)
	stream := watch(t, r)
	nextVersion(t, stream, time.Second)

	conn, err := grpcclient.Dial(r.addr, readToken)
	require.NoError(t, err)
	defer conn.Close()
	refused, err := searchv1.NewSearchServiceClient(conn).WatchIndex(context.Background(), &searchv1.WatchIndexRequest{})
	require.NoError(t, err)
	_, err = refused.Recv()
	require.Equal(t, codes.PermissionDenied, status.Code(err), "the read role may not watch")

	r.svc.EndWatches()
	_, err = stream.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err))
	_, err = watch(t, r).Recv()
	require.Equal(t, codes.Unavailable, status.Code(err))

	// The replica still applies changes while it drains (its follower runs
	// until the end): one applied after EndWatches is served as any other.
	resp, err := ingestDocs(t, r.client, md("drained.md", "", "Drained", "# Drained\n\nA zebrafish note written while the replica drains."))
	require.NoError(t, err)
	require.Equal(t, int32(1), resp.GetDocumentsWritten())
	got := search(t, r.client, &searchv1.SearchRequest{Query: "zebrafish"})
	require.NotEmpty(t, got.GetResults(), "the change is applied")
}

// answerVersion calls Search or GetChunks on c and returns the index
// version its header carries (nil: none).
func answerVersion(t *testing.T, c searchv1.SearchServiceClient, chunks bool) *searchv1.IndexVersion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var md metadata.MD
	var err error
	if chunks {
		_, err = c.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{1}}, grpc.Header(&md))
	} else {
		_, err = c.Search(ctx, &searchv1.SearchRequest{Query: "labelled answers", Limit: 5}, grpc.Header(&md))
	}
	require.NoError(t, err)
	if len(md.Get(answerversion.Header)) == 0 {
		return nil
	}
	v, ok := answerversion.From(md)
	require.True(t, ok)
	return v
}

// TestAnswerVersionHeader: Search and GetChunks tell the adapter role the
// version WatchIndex reports, and no other role; a replica with other
// ranking settings reports another version at the same point.
func TestAnswerVersionHeader(t *testing.T) {
	r, pool := start(t)
	_, err := ingestDocs(t, r.client, md("labelled.md", "", "Labelled", "# Labelled\n\nLabelled answers carry their version."))
	require.NoError(t, err)
	watched := untilVersion(t, watch(t, r), func(v *searchv1.IndexVersion) bool { return v.GetIndexGeneration() > 0 })
	require.NotEmpty(t, watched.GetSettings())

	conn, err := grpcclient.Dial(r.addr, readToken)
	require.NoError(t, err)
	defer conn.Close()
	reader := searchv1.NewSearchServiceClient(conn)
	for _, chunks := range []bool{false, true} {
		got := answerVersion(t, r.client, chunks)
		require.NotNil(t, got, "chunks %v: the adapter role is told", chunks)
		require.True(t, proto.Equal(watched, got), "chunks %v: the version WatchIndex reports: %v, %v", chunks, watched, got)
		require.Nil(t, answerVersion(t, reader, chunks), "chunks %v: the read role is not", chunks)
	}

	// The same data, other ranking settings: another version.
	cfg := testConfig()
	cfg.Fusion.K = 30
	other := startReplica(t, pool, cfg)
	theirs := untilVersion(t, watch(t, other), func(v *searchv1.IndexVersion) bool {
		return v.GetIndexGeneration() == watched.GetIndexGeneration()
	})
	require.NotEqual(t, watched.GetSettings(), theirs.GetSettings())
	require.False(t, proto.Equal(watched, theirs))
	require.True(t, proto.Equal(theirs, answerVersion(t, other.client, false)))
}

// TestRankingSettings: each ranking setting moves the fingerprint; one
// that decides no answer does not.
func TestRankingSettings(t *testing.T) {
	base := testConfig()
	for _, tc := range []struct {
		name  string
		set   func(*server.Config)
		moves bool
	}{
		{"candidates", func(c *server.Config) { c.Candidates = 200 }, true},
		{"rrf k", func(c *server.Config) { c.Fusion.K = 30 }, true},
		{"fusion method", func(c *server.Config) { c.Fusion.Method = "convex" }, true},
		{"dedup window", func(c *server.Config) { c.DedupWindow = 10 }, true},
		{"ef_search", func(c *server.Config) { c.EfSearch = 400 }, true},
		{"db timeout", func(c *server.Config) { c.DBTimeout = time.Minute }, false},
		{"cache size", func(c *server.Config) { c.CacheSize = 7 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.set(&c)
			require.Equal(t, tc.moves, server.RankingSettings(c) != server.RankingSettings(base))
		})
	}
}
