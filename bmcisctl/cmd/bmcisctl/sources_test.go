package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// sources add, sync, list and remove against a real search service, which
// fetches a real git repository (file://, allowed by the loopback setting).
func TestSourcesAddSyncListRemove(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	gitCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	gitCmd("init", "-q", "-b", "main")
	ctlWrite(t, repo, "docs/a.md", "# A\n\nThe capybara handbook page.\n")
	ctlWrite(t, repo, "docs/b.md", "# B\n\nAnother capybara page.\n")
	gitCmd("add", "-A")
	gitCmd("commit", "-q", "-m", "first")

	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search},
		ServiceEnv: map[string]map[string]string{stacktest.Search: {"BMCIS_SEARCH_SOURCES_ALLOW_LOOPBACK": "true"}}})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}

	code, _, errOut := ctlRun(t, "sources", "add", "repo", "--url", "file://"+repo)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "--kind is required")
	code, _, errOut = ctlRun(t, "sources", "add", "repo", "--kind", "git", "--url", "file://"+repo, "--every", "10s")
	require.Equal(t, exitUsage, code, "below the minimum schedule: %s", errOut)

	code, out, errOut := ctlRun(t, "sources", "add", "repo", "--kind", "git", "--url", "file://"+repo, "--path", "docs")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "added git source repo (on `bmcisctl sources sync repo` only)")

	code, out, errOut = ctlRun(t, "sources", "sync", "repo")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "repo: 2 written, 0 unchanged, 0 failed, 0 deleted")

	code, out, errOut = ctlRun(t, "search", "--mode", "bm25", "capybara")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "The capybara handbook page")

	code, out, errOut = ctlRun(t, "sources")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `repo\s+git\s+-\s+2\s+`, out)
	require.Contains(t, out, "file://"+repo)

	code, _, errOut = ctlRun(t, "sources", "sync", "nothing")
	require.Equal(t, exitFailed, code)
	require.Regexp(t, `^bmcisctl sources: sync source "nothing" via \S+: no source named .* \(NotFound\)\n$`, errOut,
		"a service's error in the one form every command prints")

	gitCmd("rm", "-q", "docs/b.md")
	gitCmd("commit", "-q", "-m", "second")
	code, out, errOut = ctlRun(t, "sources", "sync", "repo")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "0 failed, 1 deleted")

	code, out, errOut = ctlRun(t, "sources", "remove", "repo")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "removed source repo and its 1 document\n", out)
	code, out, _ = ctlRun(t, "sources")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "repo")
}
