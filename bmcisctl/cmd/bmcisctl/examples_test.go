package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// skippedExamples are the examples that cannot run hermetically, and why.
var skippedExamples = map[string]string{
	"bmcisctl bench search --chunks 100000 --duration 10s":                 "a load test: seeds 100000 chunks and runs for 10 s",
	"bmcisctl bench search --chunks 0 --modes hybrid --concurrency 1,16":   "a load test: runs for its default duration",
	"bmcisctl eval --beir ../shared/data/scifact":                          "needs the BEIR SciFact data set, outside the repository",
	"bmcisctl eval --beir ../shared/data/scifact --modes bm25 --no-ingest": "needs the BEIR SciFact data set, outside the repository",
	"bmcisctl sources sync runbooks":                                       "fetches a repository over the network (the service's tests sync real repositories)",
}

// exampleOrder runs the examples so that each finds what it names: the
// documents a delete names are synced first, the graph imported before its
// status, migrate down last.
var exampleOrder = []string{"version", "health", "ingest", "sync", "sources", "documents", "search", "reindex", "graph", "keys", "audit", "delete", "backup", "restore", "bench", "eval", "migrate"}

// exampleExitCodes are the documented codes of examples that do not exit 0.
var exampleExitCodes = map[string]int{
	// a.md and b.md are not stored: each is reported (exit 5, partial).
	"bmcisctl delete --addr search:50051 a.md b.md": exitPartial,
	// The stack holds the examples' data: a restore into it is refused,
	// with nothing written (exit 1). TestBackupWhileIngestingRestoresAStackThatAnswersTheSame
	// restores into an empty one.
	"bmcisctl restore bmcis.backup": exitFailed,
}

// Every example a command shows in its help runs against a real stack
// (the real service binaries), with its placeholders (a user's folder, a
// file, a key id, a service address) replaced by real ones, and exits 0
// (or its documented code).
func TestExamplesRunAgainstAStack(t *testing.T) {
	require.ElementsMatch(t, exampleOrder, keysOf(examples), "every command with examples has its place in exampleOrder")
	s := stacktest.Start(t, stacktest.Options{})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}
	t.Setenv("DATABASE_URL", s.DatabaseURL)
	repo := stacktest.RepoRoot(t)
	tmp := t.TempDir()
	handbook := filepath.Join(tmp, "handbook")
	ctlWrite(t, handbook, "security/old.md", "# Old policy\n\nThe old policy on reporting a suspected incident.\n")
	ctlWrite(t, handbook, "security/mfa.md", "# MFA rollout\n\nEvery employee enrols a hardware key during the mfa rollout.\n")
	corpus := ctlWrite(t, tmp, "corpus.jsonl", `{"_id":"c1","title":"Incident","text":"Report a security incident at once."}`+"\n")
	queries := ctlWrite(t, tmp, "queries.jsonl", `{"_id":"q1","text":"security incident reporting"}`+"\n")
	graphFile := filepath.Join(repo, "services", "vendorgraph", "demo", "demo-graph.jsonl")

	replace := strings.NewReplacer(
		"~/Documents/handbook", handbook,
		"search:50051", s.Addr(stacktest.Search),
		"127.0.0.1:50051", s.Addr(stacktest.Search),
		"127.0.0.1:50052", s.Addr(stacktest.VendorGraph),
		"services/", filepath.Join(repo, "services")+"/",
		" corpus.jsonl", " "+corpus,
		" queries.jsonl", " "+queries,
		" bmcis.backup", " "+filepath.Join(tmp, "bmcis.backup"),
	)
	ran := 0
	for _, name := range exampleOrder {
		for _, line := range examples[name] {
			if why, ok := skippedExamples[line]; ok {
				t.Logf("skipped %q: %s", line, why)
				continue
			}
			cmdLine := replace.Replace(line)
			stdin := ""
			if before, file, ok := strings.Cut(cmdLine, " < "); ok {
				cmdLine, stdin = before, strings.Replace(file, "graph.jsonl", graphFile, 1)
			}
			if strings.Contains(cmdLine, "KEY_ID") {
				// A key of its own: revoke and rotate each need a live one.
				owner := fmt.Sprintf("example-%d", ran)
				code, _, errOut := ctlRun(t, "keys", "create", "--name", owner, "--owner", owner)
				require.Equal(t, 0, code, errOut)
				code, out, errOut := ctlRun(t, "keys", "list", "-q", "--owner", owner)
				require.Equal(t, 0, code, errOut)
				cmdLine = strings.ReplaceAll(cmdLine, "KEY_ID", strings.TrimSpace(out))
			}
			args := shellWords(cmdLine)
			code, out, errOut := runExample(t, args, stdin)
			require.Equal(t, exampleExitCodes[line], code, "%s\nran as %q\nstdout:\n%s\nstderr:\n%s", line, args, out, errOut)
			ran++
		}
	}
	require.Equal(t, len(allExamples())-len(skippedExamples), ran)
	// migrate down ran last: the schema comes back for the stack's cleanup.
	code, _, errOut := ctlRun(t, "migrate", "up")
	require.Equal(t, 0, code, errOut)
}

// runExample runs one example line in-process: stdin (a file) as the
// standard input; a --watch line is interrupted once its first pass is
// written, as a user would.
func runExample(t *testing.T, args []string, stdin string) (int, string, string) {
	t.Helper()
	if stdin != "" {
		f, err := os.Open(stdin)
		require.NoError(t, err)
		defer f.Close()
		old := os.Stdin
		os.Stdin = f
		defer func() { os.Stdin = old }()
	}
	watch := false
	for _, a := range args {
		watch = watch || a == "--watch" || a == "-w" || a == "-watch"
	}
	if !watch {
		return ctlRun(t, args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut stacktest.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String()+errOut.String(), "watching") },
		60*time.Second, 10*time.Millisecond, "%q never started watching: %s", args, errOut.String())
	cancel()
	return <-done, out.String(), errOut.String()
}

func keysOf(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func allExamples() []string {
	var out []string
	for _, ex := range examples {
		out = append(out, ex...)
	}
	return out
}
