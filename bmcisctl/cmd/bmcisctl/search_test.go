package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// The stack's read and ingest credentials (platform/stacktest).
const (
	ctlToken       = stacktest.ServiceToken
	ctlIngestToken = stacktest.IngestToken
)

// TestMain keeps the tests away from a developer's .data/bmcisctl.json:
// every credential a test uses comes from its own environment. It also
// stops the binaries' build directory at the end (stacktest.MainCode).
func TestMain(m *testing.M) {
	os.Setenv(envCredentialsFile, filepath.Join(os.TempDir(), "bmcisctl-tests-no-credentials-file.json"))
	os.Unsetenv(envDataDir)
	if os.Getenv(envRunMain) == "1" {
		main() // the test binary run as bmcisctl (TestSecondInterruptEndsAStuckCommand)
		return
	}
	os.Exit(stacktest.MainCode(m))
}

// envRunMain makes the test binary run bmcisctl's main with its arguments.
const envRunMain = "BMCISCTL_TEST_RUN_MAIN"

// ctlServer runs the real search service binary on a fresh database and
// points the CLI at it (BMCIS_SEARCH_ADDR, the read and ingest credentials).
func ctlServer(t *testing.T) { ctlServerOf(t, false) }

// ctlServerOf is ctlServer; with old, the CLI reaches the service through
// a proxy that answers IngestDocumentsAcked the way gRPC answers a method a
// server does not have (a search service before it was added):
// Unimplemented, "unknown method".
func ctlServerOf(t *testing.T, old bool) {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}
	if old {
		t.Setenv("BMCIS_SEARCH_ADDR", olderSearchProxy(t, s.Addr(stacktest.Search)))
	}
}

// rawFrame is one gRPC message, passed through undecoded.
type rawFrame struct{ b []byte }

// rawCodec moves rawFrames as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*rawFrame).b, nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*rawFrame).b = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// olderSearchProxy serves on loopback every search method by forwarding it
// to backend, except IngestDocumentsAcked; it returns its address.
func olderSearchProxy(t *testing.T, backend string) string {
	t.Helper()
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	const acked = "/bmcis.search.v1.SearchService/IngestDocumentsAcked"
	forward := func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		if method == acked {
			return status.Error(codes.Unimplemented, "unknown method IngestDocumentsAcked for service bmcis.search.v1.SearchService")
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md))
		defer cancel()
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			return err
		}
		go func() {
			for {
				var f rawFrame
				if err := ss.RecvMsg(&f); err != nil {
					_ = cs.CloseSend()
					return
				}
				if err := cs.SendMsg(&f); err != nil {
					return
				}
			}
		}()
		for {
			var f rawFrame
			err := cs.RecvMsg(&f)
			if errors.Is(err, io.EOF) {
				ss.SetTrailer(cs.Trailer())
				return nil
			}
			if err != nil {
				ss.SetTrailer(cs.Trailer())
				return err
			}
			if err := ss.SendMsg(&f); err != nil {
				return err
			}
		}
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(forward))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String()
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
	require.Equal(t, exitPartial, code, "a failed document makes the exit status partial; stderr: %s", errOut)
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
	require.Equal(t, exitPartial, code, "a skipped link is a failure the operator sees; stderr: %s", errOut)
	require.Contains(t, out, "written 1,")
	require.Contains(t, out, "hr/payroll.md: symbolic link leads outside the ingestion root; skipped")

	code, out, errOut = ctlRun(t, "search", "-limit", "5", "zebracorn salary")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "Payroll")
}
