package stacktest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bmcis/knowledge/platform/testdb"
)

// Demo data paths, relative to the workspace root.
const (
	DemoDocsDir   = "services/search/demo/docs"
	DemoGraphFile = "services/vendorgraph/demo/demo-graph.jsonl"
	// DemoDocuments is how many documents DemoDocsDir holds: 40 markdown
	// pages and two each of PDF, DOCX and HTML.
	DemoDocuments = 46
)

// Ctl runs the built bmcisctl with the stack's client environment (service
// addresses and tokens) and returns its standard output; a non-zero exit
// fails the test with its output.
func (s *Stack) Ctl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.ctl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CtlCommand prepares the built bmcisctl with the stack's client
// environment, for a caller that runs it in the background (sync -watch)
// and interrupts it.
func (s *Stack) CtlCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	bin, err := s.binary("bmcisctl")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	for k, v := range s.ClientEnv() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if root, err := repoRoot(); err == nil {
		cmd.Dir = root
	}
	return cmd, nil
}

func (s *Stack) ctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, err := s.CtlCommand(ctx, args...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("stacktest: bmcisctl %s: %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// IngestSummary is what `bmcisctl ingest` reported.
type IngestSummary struct {
	Documents, Written, Unchanged, Failed, Chunks int
}

var (
	ingestDocsLine   = regexp.MustCompile(`documents\s+(\d+) \(written (\d+), skipped (\d+) unchanged, failed (\d+)\)`)
	ingestChunksLine = regexp.MustCompile(`chunks\s+(\d+)`)
)

// Ingest ingests files and directories (paths relative to the workspace
// root or absolute) through the search service, as `bmcisctl ingest` does:
// a directory's markdown files, source file = path relative to it,
// category = front matter `category:` or the first folder. Any failed
// document fails the test.
func (s *Stack) Ingest(t testing.TB, paths ...string) IngestSummary {
	t.Helper()
	args := append([]string{"ingest", "-quiet", "-addr", s.Addr(Search)}, paths...)
	out := s.Ctl(t, args...)
	var sum IngestSummary
	if m := ingestDocsLine.FindStringSubmatch(out); m != nil {
		sum.Documents, _ = strconv.Atoi(m[1])
		sum.Written, _ = strconv.Atoi(m[2])
		sum.Unchanged, _ = strconv.Atoi(m[3])
		sum.Failed, _ = strconv.Atoi(m[4])
	} else {
		t.Fatalf("stacktest: unexpected ingest summary:\n%s", out)
	}
	if m := ingestChunksLine.FindStringSubmatch(out); m != nil {
		sum.Chunks, _ = strconv.Atoi(m[1])
	}
	return sum
}

// IngestDemoDocs ingests the demo documents.
func (s *Stack) IngestDemoDocs(t testing.TB) IngestSummary {
	t.Helper()
	sum := s.Ingest(t, filepath.Join(RepoRoot(t), DemoDocsDir))
	if sum.Documents != DemoDocuments || sum.Failed != 0 {
		t.Fatalf("stacktest: demo documents: %+v, want %d documents, none failed", sum, DemoDocuments)
	}
	return sum
}

// IngestDocs writes docs (path relative to a fresh directory, e.g.
// "guides/cloud.md" for category "guides" → markdown content) and ingests
// them.
func (s *Stack) IngestDocs(t testing.TB, docs map[string]string) IngestSummary {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range docs {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s.Ingest(t, dir)
}

// ImportGraph imports a vendor graph JSON Lines file (see docs/VENDORGRAPH.md).
func (s *Stack) ImportGraph(t testing.TB, path string) {
	t.Helper()
	s.Ctl(t, "graph", "import", "-quiet", "-addr", s.Addr(VendorGraph), path)
}

// ImportGraphLines imports JSON Lines given as strings.
func (s *Stack) ImportGraphLines(t testing.TB, lines []string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "graph.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ImportGraph(t, p)
}

// ImportDemoGraph imports the demo vendor graph.
func (s *Stack) ImportDemoGraph(t testing.TB) {
	t.Helper()
	s.ImportGraph(t, filepath.Join(RepoRoot(t), DemoGraphFile))
}

// Key describes an API key to create.
type Key struct {
	Name, Owner string
	// Per-key limits; 0 keeps the service default.
	PerMinute, PerHour, PerDay int
	// ExpiresIn is bmcisctl's --expires-in ("90d", "1h"); empty for the default.
	ExpiresIn string
	// Categories and Tools are the key's read scopes; empty leaves them open.
	Categories, Tools []string
	// Groups are the key's caller groups (docs/ACCESS.md).
	Groups []string
}

// CreateKey creates an API key through the auth service's admin API (with
// the admin token) and returns the secret key.
func (s *Stack) CreateKey(t testing.TB, k Key) string {
	t.Helper()
	if k.Name == "" {
		k.Name = "stacktest"
	}
	args := []string{"keys", "create", "--name", k.Name}
	if k.Owner != "" {
		args = append(args, "--owner", k.Owner)
	}
	for flag, v := range map[string]int{"--limit-minute": k.PerMinute, "--limit-hour": k.PerHour, "--limit-day": k.PerDay} {
		if v > 0 {
			args = append(args, flag, strconv.Itoa(v))
		}
	}
	if k.ExpiresIn != "" {
		args = append(args, "--expires-in", k.ExpiresIn)
	}
	if len(k.Categories) > 0 {
		args = append(args, "--categories", strings.Join(k.Categories, ","))
	}
	if len(k.Tools) > 0 {
		args = append(args, "--tools", strings.Join(k.Tools, ","))
	}
	if len(k.Groups) > 0 {
		args = append(args, "--groups", strings.Join(k.Groups, ","))
	}
	key := strings.TrimSpace(s.Ctl(t, args...))
	if !strings.HasPrefix(key, "bmcis_") {
		t.Fatalf("stacktest: keys create printed %q, not a key", key)
	}
	return key
}

// KeyID is the public id part of a key (bmcis_<id>_<secret>).
func KeyID(key string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(key, "bmcis_"), "_")
	return id
}

// RevokeKey revokes a key by its id or the whole key.
func (s *Stack) RevokeKey(t testing.TB, key string) {
	t.Helper()
	id := key
	if strings.HasPrefix(key, "bmcis_") {
		id = KeyID(key)
	}
	s.Ctl(t, "keys", "revoke", id)
}

// CutDatabase makes the stack's database unreachable for the services: new
// connections are refused and open ones are terminated, as when PostgreSQL
// goes away. The returned function (also run when the test ends) lets
// connections in again.
func (s *Stack) CutDatabase(t testing.TB) (restore func()) {
	t.Helper()
	name := databaseName(t, s.DatabaseURL)
	ident := pgx.Identifier{name}.Sanitize()
	admin := func(sql string, args ...any) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testdb.AdminURL(t))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql, args...)
		return err
	}
	if err := admin("ALTER DATABASE " + ident + " WITH ALLOW_CONNECTIONS false"); err != nil {
		t.Fatalf("stacktest: refuse connections to %s: %v", name, err)
	}
	if err := admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
		t.Fatalf("stacktest: terminate connections to %s: %v", name, err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		if err := admin("ALTER DATABASE " + ident + " WITH ALLOW_CONNECTIONS true"); err != nil {
			t.Errorf("stacktest: allow connections to %s again: %v", name, err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// Exec runs one SQL statement on the stack's database (for tests that break
// the schema under a running service on purpose).
func (s *Stack) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatalf("stacktest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("stacktest: %s: %v", sql, err)
	}
}

func databaseName(t testing.TB, dsn string) string {
	t.Helper()
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return strings.TrimPrefix(u.Path, "/")
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "dbname="); ok {
			return v
		}
	}
	t.Fatalf("stacktest: no database name in the database URL")
	return ""
}

// TryCtl is Ctl that returns the failure instead of failing the test.
func (s *Stack) TryCtl(args ...string) (string, error) { return s.ctl(args...) }
