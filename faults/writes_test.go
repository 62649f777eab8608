package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// auditBackoffCap is the longest the adapter's audit recorder waits
// between two appends auth could not take (platform/auditlog): entries of
// an outage may wait that long after it before they are sent again.
const auditBackoffCap = 5 * time.Second

// TestPostgresStoppedWritePaths: while PostgreSQL is down, the writes
// TestPostgresStoppedUnderLoad does not make (an API key's creation, a
// graph import, which hands names to search before it commits, and a
// source's sync) fail with UNAVAILABLE, not INTERNAL and not a hang; each
// succeeds again within 2 s of the database accepting connections; the
// import lands once (a re-run changes nothing); and the audit entries of
// every tool call the adapter answered during the outage reach the trail
// afterwards, none lost.
func TestPostgresStoppedWritePaths(t *testing.T) {
	e := newEnv(t, envOptions{Data: true})
	a := e.startAdapter(t, "")
	dial := func(name, token string) *grpc.ClientConn {
		conn, err := grpcclient.Dial(e.stack.Addr(name), token)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	authc := authv1.NewAuthServiceClient(dial(stacktest.Auth, stacktest.AdminToken))
	vendor := vendorgraphv1.NewVendorGraphServiceClient(dial(stacktest.VendorGraph, stacktest.IngestToken))
	search := searchv1.NewSearchServiceClient(dial(stacktest.Search, stacktest.IngestToken))

	entity := `{"kind":"entity","id":"fault-vendor","name":"Fault Tolerant Systems","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`
	writes := map[string]func(ctx context.Context) error{
		"create key": func(ctx context.Context) error {
			_, err := authc.CreateKey(ctx, &authv1.CreateKeyRequest{Name: "during-the-outage"})
			return err
		},
		"import graph": func(ctx context.Context) error {
			_, err := importLines(ctx, vendor, entity)
			return err
		},
		// The source does not exist: reaching the database answers NOT_FOUND.
		"sync source": func(ctx context.Context) error {
			_, err := search.SyncSource(ctx, &searchv1.SyncSourceRequest{Name: "no-such-source"})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		},
	}
	for name, write := range writes {
		require.NoError(t, write(ctxT(t, 30*time.Second)), "%s before the outage", name)
	}

	down := time.Now()
	e.pg.Stop()
	for name, write := range writes {
		start := time.Now()
		err := write(ctxT(t, 20*time.Second))
		took := time.Since(start)
		t.Logf("%s during the outage: %s in %s: %q", name, status.Code(err), took, status.Convert(err).Message())
		require.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", name, err)
		require.NotContains(t, status.Convert(err).Message(), "127.0.0.1", "%s: the database's address reached the caller", name)
	}
	// Tool calls answered during the outage, each with a query of its own:
	// uncached, so they fail with DB_CONNECTION, and are audited as such.
	const audited = 8
	for i := range audited {
		r := a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("audited during the outage %d", i)})
		require.NoError(t, r.Transport)
		require.True(t, r.Code == "" || r.Retryable, "%s", r)
	}
	time.Sleep(time.Until(down.Add(3 * time.Second)))
	e.pg.Start()
	up := time.Now()

	back := waitAllOK(t, up, 10*time.Second, map[string]func() bool{
		"create key":   func() bool { return writes["create key"](ctxT(t, 5*time.Second)) == nil },
		"import graph": func() bool { return writes["import graph"](ctxT(t, 5*time.Second)) == nil },
		"sync source":  func() bool { return writes["sync source"](ctxT(t, 5*time.Second)) == nil },
	})
	t.Logf("back after PostgreSQL accepted connections: create key %s, import graph %s, sync source %s",
		back["create key"], back["import graph"], back["sync source"])
	for name, d := range back {
		require.LessOrEqual(t, d, recoveryBound, "%s back %s after the database", name, d)
	}

	// The import landed once: the same line again changes nothing.
	resp, err := importLines(ctxT(t, 10*time.Second), vendor, entity)
	require.NoError(t, err)
	require.Equal(t, int32(1), resp.GetEntitiesUnchanged())
	require.Zero(t, resp.GetEntitiesCreated()+resp.GetEntitiesUpdated())

	// The outage's audit entries waited in the adapter's buffer and arrive.
	db, err := pgx.Connect(ctxT(t, 10*time.Second), e.pg.URL())
	require.NoError(t, err)
	defer db.Close(context.Background())
	var n int
	require.Eventually(t, func() bool {
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM auth.audit_events
			WHERE tool = 'semantic_search' AND query LIKE 'audited during the outage %'`).Scan(&n)
		return err == nil && n >= audited
	}, auditBackoffCap+recoveryBound, 50*time.Millisecond, "audit entries of the outage: %d of %d stored", n, audited)
	require.Equal(t, audited, n, "each call audited once")
	t.Logf("audit entries of the outage stored %s after the database", time.Since(up))
}

// importLines sends lines to ImportGraph as one import.
func importLines(ctx context.Context, c vendorgraphv1.VendorGraphServiceClient, lines ...string) (*vendorgraphv1.ImportGraphResponse, error) {
	st, err := c.ImportGraph(ctx)
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		if err := st.Send(&vendorgraphv1.ImportGraphRequest{LineNumber: int64(i + 1), Line: l}); err != nil {
			break // the reply says why
		}
	}
	return st.CloseAndRecv()
}
