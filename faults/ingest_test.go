package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// corpus writes n synthetic documents as JSON Lines and returns the path.
func corpus(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	words := strings.Fields("backup restore retention replica failover latency throughput incident severity escalation vendor contract audit policy encryption rotation token quota index shard cache")
	for i := range n {
		var text strings.Builder
		for j := range 120 {
			text.WriteString(words[(i*7+j*3)%len(words)])
			text.WriteByte(' ')
		}
		line, err := json.Marshal(map[string]string{"_id": fmt.Sprintf("doc-%05d", i), "title": fmt.Sprintf("Runbook %d", i), "text": text.String()})
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "corpus.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
	return p
}

// stored counts the documents in the database, and those without chunks
// (half-written; must be none).
func (e *env) stored(t *testing.T) (docs, withoutChunks int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	conn, err := pgx.Connect(ctx, e.pg.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT EXISTS
		(SELECT 1 FROM chunks c WHERE c.document_id = d.id)) FROM documents d`).Scan(&docs, &withoutChunks))
	return docs, withoutChunks
}

// ingestCmd is `bmcisctl ingest` on path against the stack's search.
func (e *env) ingestCmd(t *testing.T, path string) (*exec.Cmd, *stacktest.SyncBuffer, *stacktest.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(stacktest.Binary(t, "bmcisctl"), "ingest", "-quiet", "-addr", e.stack.Addr(stacktest.Search), path)
	cmd.Env = os.Environ()
	for k, v := range e.stack.ClientEnv() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, stderr := &stacktest.SyncBuffer{}, &stacktest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd, stdout, stderr
}

var (
	committedLine = regexp.MustCompile(`(\d+) document\(s\) sent: (\d+) committed`)
	summaryLine   = regexp.MustCompile(`documents\s+(\d+) \(written (\d+), skipped (\d+) unchanged, failed (\d+)\)`)
)

// interruptIngest starts an ingestion of n documents, calls fault once
// some are stored, and checks what bmcisctl reports: it fails, says how
// many documents were committed, never more than the database holds once
// heal has run, and no document is half-written. Then a re-run of the same
// command converges: every document stored once, those stored before
// skipped as unchanged. It returns bmcisctl's error output.
func interruptIngest(t *testing.T, e *env, n int, fault, heal func()) string {
	t.Helper()
	path := corpus(t, n)
	cmd, _, stderr := e.ingestCmd(t, path)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.Eventually(t, func() bool { d, _ := e.stored(t); return d >= n/10 }, 60*time.Second, 20*time.Millisecond,
		"ingestion never got going: %s", stderr.String())
	fault()
	faultAt := time.Now()
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("bmcisctl did not end within 30 s of the fault: %s", stderr.String())
	}
	t.Logf("bmcisctl ended %s after the fault: %s", time.Since(faultAt).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	require.Error(t, err, "the ingestion was interrupted; bmcisctl must fail")
	m := committedLine.FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "bmcisctl must say how many documents were committed:\n%s", stderr.String())
	sent, _ := strconv.Atoi(m[1])
	committed, _ := strconv.Atoi(m[2])
	heal()
	docs, half := e.stored(t)
	t.Logf("sent %d, acknowledged %d, stored %d", sent, committed, docs)
	require.Zero(t, half, "a document without chunks: half-written")
	require.Positive(t, committed, "documents were stored before the fault; some must be acknowledged")
	require.LessOrEqual(t, committed, docs, "bmcisctl overstated the committed documents")
	require.LessOrEqual(t, committed, sent)

	// The same command again converges.
	cmd, stdout, stderr2 := e.ingestCmd(t, path)
	require.NoError(t, cmd.Run(), "re-ingest: %s %s", stdout.String(), stderr2.String())
	s := summaryLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, s, stdout.String())
	require.Equal(t, strconv.Itoa(n), s[1])
	require.Equal(t, strconv.Itoa(docs), s[3], "what was stored before is skipped as unchanged")
	require.Equal(t, "0", s[4])
	docs, half = e.stored(t)
	require.Equal(t, n, docs)
	require.Zero(t, half)
	return stderr.String()
}

// TestSearchKilledMidIngest: the search service is killed (-9) while
// bmcisctl streams documents; bmcisctl reports the acknowledged count, and
// a re-run converges once search is back.
func TestSearchKilledMidIngest(t *testing.T) {
	e := newEnv(t, envOptions{})
	search := e.stack.Service(stacktest.Search)
	out := interruptIngest(t, e, 3000,
		func() { search.Kill(t) },
		func() { search.Start(t) })
	require.Contains(t, out, "Unavailable")
}

// TestPostgresKilledMidIngest: PostgreSQL is killed (-9, every server
// process) during an ingestion; bmcisctl fails with the typed database
// error and the acknowledged count, nothing acknowledged is lost, nothing
// is half-written, and a re-ingest converges once PostgreSQL is back.
func TestPostgresKilledMidIngest(t *testing.T) {
	e := newEnv(t, envOptions{})
	addr := e.stack.Addr(stacktest.Search)
	out := interruptIngest(t, e, 3000, e.pg.Kill, func() {
		waitDatabaseHealth(t, addr, "NOT_SERVING", 10*time.Second)
		e.pg.Start()
		back := waitDatabaseHealth(t, addr, "SERVING", 10*time.Second)
		t.Logf("search's database health SERVING %s after PostgreSQL started", back)
		require.LessOrEqual(t, back, recoveryBound)
	})
	require.Contains(t, out, "Unavailable")
}

// databaseHealth is a service's database health (grpcserver's
// DatabaseHealthService): SERVING or NOT_SERVING, or the error.
func databaseHealth(t *testing.T, addr string) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: grpcserver.DatabaseHealthService})
	if err != nil {
		return status.Code(err).String()
	}
	return resp.GetStatus().String()
}

// waitDatabaseHealth waits up to d for a service's database health to be
// want, and returns how long it took.
func waitDatabaseHealth(t *testing.T, addr, want string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { return databaseHealth(t, addr) == want }, d, 20*time.Millisecond,
		"database health of %s never turned %s", addr, want)
	return time.Since(start)
}
