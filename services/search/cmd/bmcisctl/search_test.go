package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

const (
	ctlToken       = "search-cli-test-read-credential-0123456789"
	ctlIngestToken = "search-cli-test-ingest-credential-0123456789"
)

// TestMain keeps the tests away from a developer's .data/bmcisctl.json:
// every credential a test uses comes from its own environment.
func TestMain(m *testing.M) {
	os.Setenv(envCredentialsFile, filepath.Join(os.TempDir(), "bmcisctl-tests-no-credentials-file.json"))
	if os.Getenv(envRunMain) == "1" {
		main() // the test binary run as bmcisctl (TestSecondInterruptEndsAStuckCommand)
		return
	}
	os.Exit(m.Run())
}

// envRunMain makes the test binary run bmcisctl's main with its arguments.
const envRunMain = "BMCISCTL_TEST_RUN_MAIN"

// ctlServer runs a real search service on a fresh database and points the
// CLI at it (BMCIS_SEARCH_ADDR, the read and ingest credentials, DATABASE_URL).
func ctlServer(t *testing.T) { ctlServerOf(t, false) }

// ctlServerOf is ctlServer; with old, the service is registered as a
// search service before IngestDocumentsAcked was added: gRPC itself
// answers that method Unimplemented ("unknown method").
func ctlServerOf(t *testing.T, old bool) {
	t.Helper()
	pool, url := testdb.New(t)
	srv := grpcserver.New(grpcserver.Settings{Name: "search-cli-test", LogLevel: "error", ShutdownTimeout: 5 * time.Second,
		Credentials: rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf(ctlToken), rpcauth.Ingest: rpcauth.DigestOf(ctlIngestToken)}},
		grpcserver.WithLogOutput(io.Discard), grpcserver.WithClassifier(pg.ClassifyError))
	cfg := server.DefaultConfig()
	cfg.PollInterval = 100 * time.Millisecond
	svc, err := server.Open(context.Background(), pool, cfg, srv.Logger(), srv.Registry())
	require.NoError(t, err)
	desc := searchv1.SearchService_ServiceDesc
	if old {
		desc.Streams = slices.DeleteFunc(slices.Clone(desc.Streams), func(s grpc.StreamDesc) bool {
			return s.StreamName == "IngestDocumentsAcked"
		})
	}
	srv.GRPC().RegisterService(&desc, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { svc.Run(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, lis); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	t.Setenv("BMCIS_SEARCH_ADDR", lis.Addr().String())
	t.Setenv("BMCIS_SERVICE_TOKEN", ctlToken)
	t.Setenv("BMCIS_INGEST_TOKEN", ctlIngestToken)
	t.Setenv("DATABASE_URL", url)
}

func ctlRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func ctlWrite(t *testing.T, root, rel, content string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestCLIIngestSearchEvalReindex(t *testing.T) {
	ctlServer(t)
	root := t.TempDir()
	ctlWrite(t, root, "security/mfa.md", "---\ntitle: MFA Rollout\nupdated_at: 2025-01-02T03:04:05Z\n---\n# MFA Rollout\n\n## Enrolment\n\nEvery employee enrols a hardware key for multi-factor authentication.\n")
	ctlWrite(t, root, "cloud/aws.md", "# AWS Landing Zone\n\n## Accounts\n\nEach team gets an AWS account in the landing zone, with guardrails.\n")
	ctlWrite(t, root, "cloud/notes.txt", "Cloud cost reports are sent monthly to team leads.")
	ctlWrite(t, root, "cloud/broken.md", "binary\x00junk")
	pool := strings.Fields("alert runbook dashboard pager shift rota escalation incident metric latency outage budget")
	for i := 0; i < 10; i++ {
		var ws []string
		for k := 0; k < 4; k++ {
			ws = append(ws, pool[(i*5+k*3)%len(pool)])
		}
		ctlWrite(t, root, fmt.Sprintf("ops/gen-%d.md", i), fmt.Sprintf("# Ops %d\n\n%s.\n", i, strings.Join(ws, " ")))
	}

	code, out, errOut := ctlRun(t, "ingest", "-quiet", root)
	require.Equal(t, 1, code, "a failed document makes the exit status non-zero; stderr: %s", errOut)
	require.Contains(t, out, "documents  14 (written 13, skipped 0 unchanged, failed 1)")
	require.Contains(t, out, "chunks     13")
	require.Contains(t, out, "cloud/broken.md: binary content")
	require.Contains(t, errOut, "1 document(s) failed")

	require.NoError(t, os.Remove(filepath.Join(root, "cloud/broken.md")))
	code, out, _ = ctlRun(t, "ingest", "-quiet", root)
	require.Equal(t, 0, code)
	require.Contains(t, out, "written 0, skipped 13 unchanged, failed 0")

	code, out, errOut = ctlRun(t, "search", "-limit", "2", "hardware key enrolment")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1. MFA Rollout  (security/mfa.md)")
	require.Contains(t, out, "    MFA Rollout  [chunk ")
	require.Contains(t, out, "updated 2025-01-02")

	// A BEIR-shaped data set: corpus, queries, qrels.
	beir := t.TempDir()
	ctlWrite(t, beir, "corpus.jsonl", strings.Join([]string{
		`{"_id": "d1", "title": "Aspirin and headache", "text": "Aspirin relieves tension headache in adults."}`,
		`{"_id": "d2", "title": "Vitamin D", "text": "Vitamin D deficiency is common in northern winters."}`,
		`{"_id": "d3", "title": "Exercise", "text": "Regular exercise lowers blood pressure."}`,
		`{"_id": "d4", "title": "Sleep", "text": "Short sleep raises the risk of obesity."}`,
	}, "\n")+"\n")
	queries := ctlWrite(t, beir, "queries.jsonl", `{"_id": "q1", "text": "does aspirin help headache"}`+"\n"+`{"_id": "q2", "text": "vitamin D in winter"}`+"\n")
	ctlWrite(t, beir, "qrels/train.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")

	code, out, errOut = ctlRun(t, "eval", "-quiet", "-beir", beir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "corpus: 4 documents (4 written")
	for _, m := range []string{"bm25", "vector", "hybrid"} {
		require.Regexp(t, "(?m)^"+m+` +\d\.\d{4} +\d\.\d{4}`, out)
	}
	require.Regexp(t, `(?m)^bm25 +1\.0000 +1\.0000`, out)

	code, out, errOut = ctlRun(t, "search", "-queries", queries, "-top-k", "3", "-json", "-mode", "bm25")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var first struct {
		QueryID string `json:"query_id"`
		Results []struct {
			DocumentID string  `json:"document_id"`
			ChunkID    int64   `json:"chunk_id"`
			Score      float64 `json:"score"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, "q1", first.QueryID)
	require.Equal(t, "d1", first.Results[0].DocumentID)
	require.Positive(t, first.Results[0].ChunkID)
	require.Equal(t, 1.0, first.Results[0].Score)

	code, out, errOut = ctlRun(t, "reindex")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `model +builtin:lsa-v1:\d+:[0-9a-f]+ \(active; builtin, \d+ dimensions\)`, out)
	require.Contains(t, out, "embedded   17 of 17 chunks")

	code, _, errOut = ctlRun(t, "search", "-mode", "nope", "x")
	require.Equal(t, 2, code, errOut)
	code, _, _ = ctlRun(t, "search", "-queries", queries)
	require.Equal(t, 2, code, "-queries needs -json")
}

func TestCLIIngestSkipsLinksOutOfTheRoot(t *testing.T) {
	ctlServer(t)
	outside := t.TempDir()
	secret := ctlWrite(t, outside, "payroll.md", "# Payroll\n\nThe zebracorn salary table is confidential.\n")
	root := t.TempDir()
	ctlWrite(t, root, "hr/handbook.md", "# Handbook\n\nHolidays are booked in the portal.\n")
	require.NoError(t, os.Symlink(secret, filepath.Join(root, "hr/payroll.md")))

	code, out, errOut := ctlRun(t, "ingest", "-quiet", root)
	require.Equal(t, 1, code, "a skipped link is a failure the operator sees; stderr: %s", errOut)
	require.Contains(t, out, "written 1,")
	require.Contains(t, out, "hr/payroll.md: symbolic link leads outside the ingestion root; skipped")

	code, out, errOut = ctlRun(t, "search", "-limit", "5", "zebracorn salary")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "Payroll")
}
