package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A sync keeps the stored version of a file that became a named pipe, and
// does not block on it.
func TestSyncSkipsANamedPipe(t *testing.T) {
	ctlServer(t)
	dir := t.TempDir()
	ctlWrite(t, dir, "a.md", "# A\n\nThe first page about pangolins.\n")
	p := ctlWrite(t, dir, "p.md", "# P\n\nThe second page about pangolins.\n")
	code, out, errOut := ctlRun(t, "sync", "docs", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)

	require.NoError(t, os.Remove(p))
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	code, out, _ = ctlRun(t, "sync", "docs", dir)
	require.Equal(t, exitPartial, code)
	require.Contains(t, out, "1 sent (0 written, 1 unchanged), 0 kept unchanged, 0 deleted, 1 failed")
	require.Contains(t, out, p+": not a regular file")
	code, out, errOut = ctlRun(t, "search", "-mode", "bm25", "pangolins")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "The second page about pangolins", "the pipe's previous version stays")
}

// A file whose name holds a control character is refused by the service
// (no lookup could name its id, platform/docid): it is reported as that
// file's failure, quoted, and the other files are synced.
func TestSyncReportsAControlCharacterName(t *testing.T) {
	ctlServer(t)
	dir := t.TempDir()
	ctlWrite(t, dir, "a.md", "# A\n\nThe first page about tapirs.\n")
	ctlWrite(t, dir, "b\x1b[2Jc.md", "# B\n\nThe second page about tapirs.\n")
	code, out, errOut := ctlRun(t, "sync", "docs", dir)
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "2 sent (1 written, 0 unchanged), 0 kept unchanged, 0 deleted, 1 failed")
	require.Contains(t, out, `  "`+dir+`/b\x1b[2Jc.md": external_id must not contain control characters`)
	require.NotContains(t, out, "\x1b", "the raw escape never reaches the terminal")
	code, out, errOut = ctlRun(t, "search", "-mode", "bm25", "tapirs")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "The first page about tapirs")
	require.NotContains(t, out, "The second page about tapirs")
}

// The first interrupt cancels the command; a second one ends a command
// stuck where it cannot see that (here: opening a named pipe with no
// writer, as -queries does).
func TestSecondInterruptEndsAStuckCommand(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "queries.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "search", "-addr", "127.0.0.1:1", "-json", "-queries", fifo)
	cmd.Env = append(os.Environ(), envRunMain+"=1", "BMCIS_SERVICE_TOKEN="+ctlToken)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Opening the write end succeeds once the command has the read end
	// open: it is then blocked reading (its signal handler is installed).
	var w *os.File
	require.Eventually(t, func() bool {
		w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the command never opened the pipe: %s", stderr.String())
	defer w.Close()

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		t.Fatalf("one interrupt cannot unblock the read; the command ended with %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		ws := exit.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT, "killed by the second interrupt: %v", err)
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatal("a second interrupt did not end the command")
	}
}
