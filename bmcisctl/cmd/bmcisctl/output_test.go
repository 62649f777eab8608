package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// jsonLines decodes out as one JSON object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "not one JSON object per line: %q", l)
		objs = append(objs, m)
	}
	return objs
}

// Every result command takes -o table|json|yaml through the one output
// helper: json one object per line (per pass, per item), yaml the same
// keys, table the default.
func TestResultCommandsOutputFormats(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "security/a.md", "# Incident\n\nReport a suspected incident to the security desk at once.\n")
	ctlWrite(t, docs, "cloud/c.md", "# Landing zone\n\nEach team gets an account in the landing zone.\n")

	// ingest: one object; the table stays the default.
	code, out, errOut := ctlRun(t, "ingest", docs, "-o", "json", "--quiet")
	require.Equal(t, 0, code, errOut)
	objs := jsonLines(t, out)
	require.Len(t, objs, 1)
	require.EqualValues(t, 2, objs[0]["documents"])
	require.EqualValues(t, 2, objs[0]["written"])
	require.Empty(t, objs[0]["failures"])
	code, out, errOut = ctlRun(t, "ingest", docs, "--output=yaml", "-quiet")
	require.Equal(t, 0, code, errOut)
	var ing map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &ing))
	require.EqualValues(t, 2, ing["unchanged"])
	code, out, errOut = ctlRun(t, "ingest", docs, "-quiet")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "documents  2 (written 0, skipped 2 unchanged, failed 0)")

	// sync: its counts as one object.
	code, out, errOut = ctlRun(t, "sync", "handbook", docs, "-o", "json")
	require.Equal(t, 0, code, errOut)
	objs = jsonLines(t, out)
	require.Len(t, objs, 1)
	require.Equal(t, "handbook", objs[0]["source"])
	require.EqualValues(t, 2, objs[0]["sent"], out)
	code, out, errOut = ctlRun(t, "sync", "handbook", docs, "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var syn map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &syn))
	require.EqualValues(t, 2, syn["unchanged"], out)

	// A failed document is listed in the object, and the exit code is
	// still partial.
	ctlWrite(t, docs, "broken.pdf", "not a pdf at all")
	code, out, _ = ctlRun(t, "sync", "handbook", docs, "-o", "json")
	require.Equal(t, exitPartial, code)
	objs = jsonLines(t, out)
	require.EqualValues(t, 1, objs[0]["failed"])
	failures, ok := objs[0]["failures"].([]any)
	require.True(t, ok)
	require.Len(t, failures, 1)
	require.Contains(t, failures[0].(map[string]any)["where"], "broken.pdf")
	require.NoError(t, os.Remove(filepath.Join(docs, "broken.pdf")))

	// delete: one object per id, as each is done; yaml one list.
	code, out, _ = ctlRun(t, "delete", "handbook:security/a.md", "no/such.md", "-o", "json")
	require.Equal(t, exitPartial, code)
	objs = jsonLines(t, out)
	require.Len(t, objs, 2)
	require.Equal(t, true, objs[0]["deleted"])
	require.EqualValues(t, 1, objs[0]["chunks_deleted"])
	require.Equal(t, false, objs[1]["deleted"])
	require.Equal(t, "not found", objs[1]["error"])
	code, out, errOut = ctlRun(t, "delete", "-o", "yaml", "handbook:cloud/c.md")
	require.Equal(t, 0, code, errOut)
	var dels []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &dels))
	require.Len(t, dels, 1)
	require.Equal(t, "handbook:cloud/c.md", dels[0]["id"])

	// health: one object per address.
	addr := os.Getenv("BMCIS_SEARCH_ADDR")
	code, out, errOut = ctlRun(t, "health", addr, "-o", "json")
	require.Equal(t, 0, code, errOut)
	objs = jsonLines(t, out)
	require.Equal(t, []map[string]any{{"address": addr, "status": "SERVING"}}, objs)
	code, out, errOut = ctlRun(t, "health", addr, "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var hs []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &hs))
	require.Equal(t, "SERVING", hs[0]["status"])
	code, out, _ = ctlRun(t, "health", "127.0.0.1:1", "-o", "json")
	require.Equal(t, exitUnavailable, code)
	require.Equal(t, "UNREACHABLE", jsonLines(t, out)[0]["status"])

	// reindex: the service's report with the command's seconds (on a
	// corpus large enough to train the builtin model).
	code, _, errOut = ctlRun(t, "ingest", "-q", filepath.Join(stacktest.RepoRoot(t), "services", "search", "demo", "docs"))
	require.Equal(t, 0, code, errOut)
	code, out, errOut = ctlRun(t, "reindex", "-o", "json")
	require.Equal(t, 0, code, errOut)
	objs = jsonLines(t, out)
	require.Len(t, objs, 1)
	require.NotEmpty(t, objs[0]["model"])
	require.Contains(t, objs[0], "seconds")
	require.Contains(t, objs[0], "embedded_chunks")

	// An unknown format is a usage error on each of them, before any work.
	for _, cmd := range [][]string{
		{"ingest", docs}, {"sync", "handbook", docs}, {"delete", "x"}, {"health", addr}, {"reindex"},
	} {
		code, _, _ = ctlRun(t, append(cmd, "-o", "xml")...)
		require.Equal(t, exitUsage, code, "%v", cmd)
	}
}

// sync --watch -o json is a stream: one object per pass, on its own line,
// and nothing else on stdout.
func TestSyncWatchJSONIsOneObjectPerPass(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "a.md", "# A\n\nThe first page about otters.\n")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut stacktest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sync", "--watch", "--interval", "20ms", "--debounce", "0s", "-o", "json", "wiki", docs}, &out, &errOut)
	}()
	passes := func() int { return strings.Count(out.String(), "\n") }
	require.Eventually(t, func() bool { return passes() == 1 }, 30*time.Second, 10*time.Millisecond, errOut.String())
	ctlWrite(t, docs, "b.md", "# B\n\nThe second page about otters.\n")
	require.Eventually(t, func() bool { return passes() == 2 }, 30*time.Second, 10*time.Millisecond, errOut.String())
	cancel()
	require.Equal(t, 0, <-done, errOut.String())
	objs := jsonLines(t, out.String())
	require.Len(t, objs, 2)
	require.EqualValues(t, 1, objs[0]["sent"])
	require.EqualValues(t, 1, objs[1]["sent"])
	require.EqualValues(t, 1, objs[1]["kept"])
	require.Contains(t, errOut.String(), "watching", "notes go to stderr, so stdout stays a stream")
}

// The keys, graph import, migrate and version results take -o too.
func TestKeysGraphMigrateVersionOutputFormats(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}
	t.Setenv("DATABASE_URL", s.DatabaseURL)

	code, out, errOut := ctlRun(t, "keys", "create", "--name", "output-test", "-o", "json")
	require.Equal(t, 0, code, errOut)
	created := jsonLines(t, out)
	require.Len(t, created, 1)
	require.NotEmpty(t, created[0]["api_key"])
	id, _ := created[0]["key"].(map[string]any)["key_id"].(string)
	require.NotEmpty(t, id)
	code, out, errOut = ctlRun(t, "keys", "rotate", id, "--overlap", "1h", "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var rotated map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &rotated))
	require.Equal(t, id, rotated["previous"].(map[string]any)["key_id"])
	code, out, errOut = ctlRun(t, "keys", "revoke", id, "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, id, jsonLines(t, out)[0]["key"].(map[string]any)["key_id"])

	graphFile := filepath.Join(stacktest.RepoRoot(t), "services", "vendorgraph", "demo", "demo-graph.jsonl")
	code, out, errOut = ctlRun(t, "graph", "import", graphFile, "-q", "-o", "json")
	require.Equal(t, 0, code, errOut)
	imp := jsonLines(t, out)[0]
	require.Equal(t, graphFile, imp["file"])
	require.Contains(t, imp, "entities_created")
	require.Contains(t, imp, "elapsed_seconds")

	code, out, errOut = ctlRun(t, "migrate", "status", "-o", "json")
	require.Equal(t, 0, code, errOut)
	st := jsonLines(t, out)[0]
	require.Equal(t, "status", st["action"])
	require.Equal(t, false, st["pending"])
	require.Greater(t, st["schema_version"], float64(0))
	code, out, errOut = ctlRun(t, "migrate", "up", "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	var up map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &up))
	require.Equal(t, st["schema_version"], float64(up["schema_version"].(int)))

	code, out, errOut = ctlRun(t, "version", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, jsonLines(t, out)[0], "commit")
	code, out, _ = ctlRun(t, "version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "bmcisctl "), out)

	for _, cmd := range [][]string{{"keys", "create", "--name", "x"}, {"keys", "revoke", "x"}, {"keys", "rotate", "x"},
		{"graph", "import", graphFile}, {"migrate", "status"}, {"version"}} {
		code, _, _ = ctlRun(t, append(cmd, "-o", "xml")...)
		require.Equal(t, exitUsage, code, "%v", cmd)
	}
}
