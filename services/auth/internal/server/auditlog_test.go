package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
)

func adapterClient(t *testing.T, addr string) authv1.AuthServiceClient {
	t.Helper()
	conn, err := grpcclient.Dial(addr, authtest.AdapterToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return authv1.NewAuthServiceClient(conn)
}

// TestRecorderAppendsToAuth sends entries through platform/auditlog to a
// real auth service, with query text and with the hash alone, and Close
// flushes what the interval has not sent yet.
func TestRecorderAppendsToAuth(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	for _, text := range []bool{true, false} {
		// A long interval: only Close sends.
		r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{QueryText: text, FlushInterval: time.Hour})
		require.NoError(t, err)
		principal := "key-text"
		if !text {
			principal = "key-hash"
		}
		r.Record(auditlog.Entry{Principal: principal, PrincipalKind: auditlog.KindAPIKey, Tool: "semantic_search",
			Query: "payroll vendors", ChunkIDs: []int64{3, 1}, Outcome: auditlog.OK})
		r.Close(context.Background())

		got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()), &authv1.ListAuditEventsRequest{Principal: principal})
		require.NoError(t, err)
		require.Len(t, got.GetEvents(), 1)
		e := got.GetEvents()[0]
		require.Equal(t, auditlog.QueryHash("payroll vendors"), e.GetQuerySha256())
		require.Equal(t, []int64{3, 1}, e.GetChunkIds())
		require.Equal(t, "adapter", e.GetEdge())
		if text {
			require.Equal(t, "payroll vendors", e.GetQuery())
		} else {
			require.Empty(t, e.GetQuery(), "BMCIS_AUDIT_QUERY_TEXT=false keeps only the hash")
		}
	}
}

// TestRecorderAuthOutage stops auth: Record still returns at once, the
// entries the buffer cannot hold are dropped and counted, and nothing is
// sent twice or blocks Close past its deadline.
func TestRecorderAuthOutage(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	client := adapterClient(t, in.Addr)
	in.Stop()
	reg := prometheus.NewRegistry()
	r, err := auditlog.New(client, auditlog.Config{BufferSize: 10, BatchSize: 5, FlushInterval: 10 * time.Millisecond,
		Timeout: 200 * time.Millisecond, Registerer: reg})
	require.NoError(t, err)
	for range 100 {
		r.Record(auditlog.Entry{Principal: "k", Tool: "get_chunks", Outcome: auditlog.OK})
	}
	// The buffer holds 10 and the sender at most a batch of 5: the rest
	// are refused at once.
	require.GreaterOrEqual(t, r.Dropped(), int64(85))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.Close(ctx)
	require.Equal(t, int64(100), r.Dropped(), "every entry is dropped and counted, none lost silently")
	var counted float64
	for _, reason := range []string{auditlog.DropBufferFull, auditlog.DropAppendError, auditlog.DropRefused, auditlog.DropClosed} {
		counted += testutil.ToFloat64(r.DroppedCounter(reason))
	}
	require.Equal(t, float64(100), counted, "bmcis_audit_events_dropped_total")
	require.Equal(t, 1, testutil.CollectAndCount(reg, "bmcis_audit_events_dropped_total")/4, "registered, one series per reason")
	r.Record(auditlog.Entry{Tool: "get_chunks", Outcome: auditlog.OK})
	require.Equal(t, int64(101), r.Dropped(), "after Close, a record is counted as dropped")
}

// TestRecorderUntrustedText records what callers choose: a User-Agent or
// a decoded URL path with bytes that are not UTF-8 (proto refuses to send
// such a string), and a read of more chunks than an entry may list. Each
// is stored, repaired or cut, and the batch beside it is not lost.
func TestRecorderUntrustedText(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{QueryText: true, FlushInterval: time.Hour})
	require.NoError(t, err)
	many := make([]int64, auditlog.MaxChunkIDs+500)
	for i := range many {
		many[i] = int64(i)
	}
	r.Record(auditlog.Entry{Principal: "bystander", Tool: "semantic_search", Outcome: auditlog.OK})
	r.Record(auditlog.Entry{Principal: "bad-text", Tool: "GET /v1/documents/{id}", Target: "/v1/documents/\xff",
		ClientName: "agent\xfe", Query: "q\xc3", Outcome: auditlog.OK})
	r.Record(auditlog.Entry{Principal: "many-chunks", Tool: "get_chunks", ChunkIDs: many, Outcome: auditlog.OK})
	r.Close(context.Background())
	require.Zero(t, r.Dropped())

	got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()), &authv1.ListAuditEventsRequest{})
	require.NoError(t, err)
	byPrincipal := map[string]*authv1.AuditEvent{}
	for _, e := range got.GetEvents() {
		byPrincipal[e.GetPrincipal()] = e
	}
	require.Len(t, byPrincipal, 3)
	bad := byPrincipal["bad-text"]
	require.Equal(t, "/v1/documents/\uFFFD", bad.GetTarget())
	require.Equal(t, "agent\uFFFD", bad.GetClientName())
	require.Equal(t, "q\uFFFD", bad.GetQuery())
	require.Equal(t, auditlog.QueryHash("q\xc3"), bad.GetQuerySha256(), "the hash is of what the caller sent")
	require.Len(t, byPrincipal["many-chunks"].GetChunkIds(), auditlog.MaxChunkIDs)
}

// TestRecorderLongTextKeepsBatchesSmall: callers choose a URL's path and
// how many ids they ask for, so a few hundred reads with 64 KB targets
// would make one batch larger than the service takes (4 MB), retried until
// the buffer filled. The edge cuts text to what auth keeps, so every entry
// arrives, cut on a character boundary.
func TestRecorderLongTextKeepsBatchesSmall(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{QueryText: true, FlushInterval: time.Hour})
	require.NoError(t, err)
	long := strings.Repeat("é", 32<<10) // 64 KiB, two bytes a character
	const n = 100
	for range n {
		r.Record(auditlog.Entry{Principal: "long", Tool: "GET /v1/chunks", Target: "/" + long, Query: long,
			ClientName: long, Outcome: auditlog.OK})
	}
	r.Close(context.Background())
	require.Zero(t, r.Dropped())

	got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()), &authv1.ListAuditEventsRequest{PageSize: 1000})
	require.NoError(t, err)
	require.Len(t, got.GetEvents(), n)
	e := got.GetEvents()[0]
	require.Equal(t, "/"+long[:auditlog.MaxText-2], e.GetTarget(), "cut before the character the limit splits")
	require.Equal(t, long[:auditlog.MaxText], e.GetQuery())
	require.Equal(t, long[:auditlog.MaxLabel], e.GetClientName())
	require.Equal(t, auditlog.QueryHash(long), e.GetQuerySha256(), "the hash is of the whole query")
}

// TestRecorderDropsRefusedBatch: a batch auth refuses as invalid (here an
// entry without a tool) is dropped at once and counted as refused, not
// retried while the buffer fills; the entries after it are sent.
func TestRecorderDropsRefusedBatch(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	reg := prometheus.NewRegistry()
	r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{FlushInterval: 10 * time.Millisecond, Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(context.Background()) })

	r.Record(auditlog.Entry{Principal: "malformed", Outcome: auditlog.OK})
	require.Eventually(t, func() bool { return r.Dropped() == 1 }, 30*time.Second, 10*time.Millisecond,
		"the refused batch is dropped without waiting for the buffer to fill")
	require.Equal(t, 1.0, testutil.ToFloat64(r.DroppedCounter(auditlog.DropRefused)))
	require.Zero(t, testutil.ToFloat64(r.DroppedCounter(auditlog.DropAppendError)))

	r.Record(auditlog.Entry{Principal: "after", Tool: "get_chunks", Outcome: auditlog.OK})
	require.Eventually(t, func() bool {
		got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()), &authv1.ListAuditEventsRequest{Principal: "after"})
		return err == nil && len(got.GetEvents()) == 1
	}, 30*time.Second, 10*time.Millisecond, "the sender moved on to the next batch")
	require.Equal(t, int64(1), r.Dropped())
}

// TestRecorderSendsALargeBatchWholeAndInOrder: 300 entries each naming 20
// documents with ids of 1 KiB, about 6 MB, recorded at once. Without a byte bound the append would be one message
// over gRPC's 4 MiB limit, refused, and every entry dropped; bounded (1 MiB
// by default) it goes as several appends, and every entry lands, in the
// order recorded.
func TestRecorderSendsALargeBatchWholeAndInOrder(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	const n = 300
	at := time.Now().Truncate(time.Microsecond)
	var docs []string
	for i := range 20 {
		docs = append(docs, fmt.Sprintf("handbook:%02d/", i)+strings.Repeat("x", 1012))
	}
	record := func(r *auditlog.Recorder, principal string) []string {
		var want []string
		for i := range n {
			id := fmt.Sprintf("req-%04d", i)
			want = append(want, id)
			// One time for all: the trail then lists them by the order stored.
			r.Record(auditlog.Entry{Time: at, Principal: principal, PrincipalKind: auditlog.KindAPIKey, Tool: "get_chunks",
				DocumentIDs: docs, Outcome: auditlog.OK, RequestID: id})
		}
		return want
	}
	stored := func(principal string) []string {
		// The largest page size: the 6 MB do not fit one answer, so each
		// page ends at the reply's byte bound, with a token for the rest.
		var events []*authv1.AuditEvent
		for page := ""; ; {
			got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()),
				&authv1.ListAuditEventsRequest{Principal: principal, PageSize: 1000, PageToken: page})
			require.NoError(t, err)
			require.LessOrEqual(t, proto.Size(got), 2<<20+64<<10, "a page stays within the reply's byte bound")
			events = append(events, got.GetEvents()...)
			if page = got.GetNextPageToken(); page == "" {
				break
			}
			require.Less(t, len(got.GetEvents()), 1000, "cut by bytes, not by count")
		}
		var ids []string
		for _, e := range slices.Backward(events) { // newest first
			require.Equal(t, docs, e.GetDocumentIds())
			ids = append(ids, e.GetRequestId())
		}
		return ids
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	unbounded, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{FlushInterval: time.Hour, MaxBatchBytes: 1 << 30})
	require.NoError(t, err)
	record(unbounded, "key-unbounded")
	unbounded.Close(ctx)
	require.Equal(t, int64(n), unbounded.Dropped(), "one append of 6 MB is refused whole")
	require.Empty(t, stored("key-unbounded"))

	// Sent by Close, and by the sender as the entries come.
	for _, interval := range []time.Duration{time.Hour, 10 * time.Millisecond} {
		principal := "key-bounded-" + interval.String()
		r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{FlushInterval: interval})
		require.NoError(t, err)
		want := record(r, principal)
		r.Close(ctx)
		require.Zero(t, r.Dropped())
		require.Equal(t, want, stored(principal), "every entry, in the order recorded")
	}
}

// TestRecorderRefusalsAfterCloseAreCountedDropped: Close writes the summary
// of every open refusal window; a refusal recorded after that (a request
// racing the shutdown) has no summary left to stand in, so it is counted
// dropped as any entry after Close is, never only "suppressed" and lost.
func TestRecorderRefusalsAfterCloseAreCountedDropped(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	reg := prometheus.NewRegistry()
	r, err := auditlog.New(adapterClient(t, in.Addr), auditlog.Config{FlushInterval: time.Hour, RefusalsPerAddress: 1, Registerer: reg})
	require.NoError(t, err)
	refusal := auditlog.Entry{ClientAddress: "198.51.100.7", Tool: "POST /mcp", Target: "/mcp", Outcome: "AUTH_INVALID"}
	r.Record(refusal) // the address's one recorded refusal
	r.Record(refusal) // suppressed: Close writes its summary
	r.Close(context.Background())
	require.Zero(t, r.Dropped())

	r.Record(refusal)
	r.Record(refusal)
	require.Equal(t, int64(2), r.Dropped(), "after Close, a refusal is dropped and counted")
	require.Equal(t, 2.0, testutil.ToFloat64(r.DroppedCounter(auditlog.DropClosed)))

	got, err := in.Client.ListAuditEvents(authtest.Admin(context.Background()), &authv1.ListAuditEventsRequest{Tool: "POST /mcp"})
	require.NoError(t, err)
	var targets []string
	for _, e := range got.GetEvents() {
		targets = append(targets, e.GetTarget())
	}
	require.Equal(t, []string{auditlog.SuppressedSummary(1, "198.51.100.7"), "/mcp"}, targets, "newest first")
}
