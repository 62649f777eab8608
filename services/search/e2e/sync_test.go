package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// folder is a directory the test edits.
type folder string

func (f folder) put(t *testing.T, rel, body string) {
	t.Helper()
	p := filepath.Join(string(f), filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
}

func (f folder) remove(t *testing.T, rel string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(string(f), filepath.FromSlash(rel))))
}

// `bmcisctl sync` adds, edits and deletes a folder's documents, once and
// with -watch, against the real service; two sources with the same file
// names, and plainly ingested documents, never lose each other's documents.
func TestSyncFolders(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	addr := s.Addr(stacktest.Search)
	// found is how many results a keyword query has.
	found := func(word string) int {
		out := s.Ctl(t, "search", "-addr", addr, "-mode", "bm25", "-limit", "50", word)
		return strings.Count(out, "    matched: ")
	}

	plain := folder(t.TempDir())
	plain.put(t, "a.md", "# Plain\n\nThe plain capybara note.\n")
	s.Ctl(t, "ingest", "-quiet", "-addr", addr, string(plain))

	hb, wiki := folder(t.TempDir()), folder(t.TempDir())
	hb.put(t, "a.md", "# A\n\nThe handbook walrus page.\n")
	hb.put(t, "b.md", "# B\n\nThe handbook narwhal page.\n")
	hb.put(t, "sub/c.md", "# C\n\nThe handbook beluga page.\n")
	hb.put(t, "broken.pdf", "not a pdf at all")
	wiki.put(t, "a.md", "# A\n\nThe wiki walrus page.\n")
	wiki.put(t, "b.md", "# B\n\nThe wiki narwhal page.\n")
	wiki.put(t, "c.md", "# C\n\nThe wiki tapir page.\n")

	out, err := s.TryCtl("sync", "-addr", addr, "handbook", string(hb))
	require.Error(t, err, "a failed file makes the exit status 5 (partial)")
	require.Contains(t, out, "4 sent (3 written, 0 unchanged), 0 kept unchanged, 0 deleted, 1 failed")
	require.Contains(t, out, filepath.Join(string(hb), "broken.pdf")+": not a PDF")
	out = s.Ctl(t, "sync", "-addr", addr, "wiki", string(wiki))
	require.Contains(t, out, "3 sent (3 written")
	require.Equal(t, 2, found("walrus"))
	require.Equal(t, 2, found("narwhal"))

	// Edit one file, delete one, add one, fix the broken one.
	hb.put(t, "a.md", "# A\n\nThe handbook walrus page, now about manatees.\n")
	hb.remove(t, "b.md")
	hb.put(t, "d.md", "# D\n\nThe handbook dugong page.\n")
	hb.remove(t, "broken.pdf")
	out = s.Ctl(t, "sync", "-addr", addr, "handbook", string(hb))
	require.Contains(t, out, "3 sent (2 written, 1 unchanged), 0 kept unchanged, 1 deleted, 0 failed")
	require.Equal(t, 1, found("narwhal"), "the wiki's b.md stays")
	require.Equal(t, 1, found("manatees"))
	require.Equal(t, 1, found("dugong"))
	require.Equal(t, 1, found("capybara"), "plain ingestion is no source's")

	srcs := s.Ctl(t, "sources", "-addr", addr)
	require.Regexp(t, `handbook\s+folder\s+-\s+3\s+\d+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+2\s+1\s+0\s+1\s+-\s+`+regexp.QuoteMeta(string(hb)), srcs)
	require.Regexp(t, `wiki\s+folder\s+-\s+3\s+`, srcs)

	// -watch: follows changes until interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := s.CtlCommand(ctx, "sync", "-addr", addr, "-watch", "-interval", "100ms", "-debounce", "200ms", "wiki", string(wiki))
	require.NoError(t, err)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "watching ") }, 30*time.Second, 50*time.Millisecond)

	wiki.put(t, "b.md", "# B\n\nThe wiki narwhal page, edited to mention axolotls.\n")
	wiki.put(t, "new/e.md", "# E\n\nThe wiki quokka page.\n")
	wiki.remove(t, "a.md")
	// The pass is done when its summary is printed: the documents are
	// searchable a moment before, while the stream closes.
	passDone := regexp.MustCompile(`sync wiki: 2 sent \(2 written, 0 unchanged\), 1 kept unchanged, 1 deleted, 0 failed`)
	require.Eventually(t, func() bool {
		return passDone.MatchString(stdout.String())
	}, 30*time.Second, 200*time.Millisecond, "watch output:\n%s\n%s", stdout.String(), stderr.String())
	require.True(t, found("axolotls") == 1 && found("quokka") == 1 && found("walrus") == 1)
	require.Equal(t, 1, found("manatees"), "the handbook's a.md stays")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, "interrupt ends the watch cleanly: %s", stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("sync -watch did not stop on interrupt")
	}
	require.Regexp(t, `wiki\s+folder\s+-\s+3\s+`, s.Ctl(t, "sources", "-addr", addr))
	require.Equal(t, 1, found("tapir"), "the unchanged file was kept, not resent")

	// A folder that cannot be read is not a folder whose files are gone:
	// nothing stored under it is deleted, and the summary says so. The
	// sync runs as a user the folder's permissions apply to (root ignores
	// them; CI runs as root), so the real directory read fails.
	locked := folder(worldReadableDir(t))
	locked.put(t, "a.md", "# A\n\nThe locked gerenuk page.\n")
	locked.put(t, "sub/b.md", "# B\n\nThe locked gerenuk annex.\n")
	locked.put(t, "sub/c.md", "# C\n\nThe locked gerenuk appendix.\n")
	out, err = ctlAsUnprivileged(t, s, "sync", "-addr", addr, "locked", string(locked))
	require.NoError(t, err)
	require.Contains(t, out, "3 sent (3 written, 0 unchanged), 0 kept unchanged, 0 deleted, 0 failed")
	sub := filepath.Join(string(locked), "sub")
	for _, tc := range []struct{ dir, summary string }{
		{sub, "1 sent (0 written, 1 unchanged), 0 kept unchanged, 0 deleted, 1 failed"},
		{string(locked), "0 sent (0 written, 0 unchanged), 0 kept unchanged, 0 deleted, 1 failed"},
	} {
		require.NoError(t, os.Chmod(tc.dir, 0))
		out, err = ctlAsUnprivileged(t, s, "sync", "-addr", addr, "locked", string(locked))
		require.NoError(t, os.Chmod(tc.dir, 0o755))
		require.Error(t, err, "an unreadable folder is a failure")
		require.Contains(t, out, tc.summary)
		require.Contains(t, out, tc.dir+": open "+tc.dir+": permission denied (a folder: every document stored under it stays)")
		require.Equal(t, 3, found("gerenuk"), "nothing under the unreadable folder is deleted")
	}
	locked.remove(t, "sub/c.md")
	out, err = ctlAsUnprivileged(t, s, "sync", "-addr", addr, "locked", string(locked))
	require.NoError(t, err)
	require.Contains(t, out, "2 sent (0 written, 2 unchanged), 0 kept unchanged, 1 deleted, 0 failed", "readable again, gone files go")
	require.Equal(t, 2, found("gerenuk"))
}

// worldReadableDir is a temporary folder any user can read (t.TempDir's
// folders are private to their owner).
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bmcis-sync-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				_ = os.Chmod(p, 0o755) // a failed test may leave a folder locked
			}
			return nil
		})
		_ = os.RemoveAll(dir)
	})
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// ctlAsUnprivileged runs bmcisctl as a user file permissions apply to: this
// one, or nobody (65534) when the test runs as root, from a copy of the
// binary that user may execute.
func ctlAsUnprivileged(t *testing.T, s *stacktest.Stack, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := s.CtlCommand(ctx, args...)
	require.NoError(t, err)
	if os.Geteuid() == 0 {
		bin := filepath.Join(worldReadableDir(t), "bmcisctl")
		data, err := os.ReadFile(cmd.Path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bin, data, 0o755))
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.Dir = filepath.Dir(bin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String(), err
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
