package sources

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A folder below the configured root: the first run lists every document
// (categories from the first folder), the next reads only changed files;
// a folder elsewhere, or with no root configured, is refused.
func TestFolderSource(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "handbook")
	write := func(rel, content string, mod time.Time) {
		t.Helper()
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(p, mod, mod))
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write("a.md", "# A\n\nalpha", t0)
	write("team/b.md", "# B\n\nbravo", t0)
	write("team/tool.go", "package tool", t0)
	write(".git/HEAD", "ref", t0)
	env := Env{Limits: DefaultLimits(), FolderRoot: root}

	first := fetchOK(t, folderKind, map[string]string{"path": dir}, nil, env)
	require.True(t, first.Full)
	require.Equal(t, []string{"a.md", "team/b.md"}, upsertIDs(first))
	cats := map[string]string{}
	for _, f := range first.Upserts {
		cats[f.ID] = f.Category
	}
	require.Equal(t, map[string]string{"a.md": "", "team/b.md": "team"}, cats)

	write("a.md", "# A\n\nalpha, edited", t0.Add(time.Hour))
	second := fetchOK(t, folderKind, map[string]string{"path": dir}, first.Cursor, env)
	require.Equal(t, []string{"a.md"}, upsertIDs(second))
	require.Equal(t, []string{"team/b.md"}, second.Unchanged)

	for _, s := range []map[string]string{{"path": "/etc"}, {"path": root + "/../x"}, {"path": "relative"}, {"path": dir, "url": "x"}} {
		_, err := folderKind.Check(s, env)
		require.Equal(t, BadSettings, CodeOf(err), "%v", s)
	}
	_, err := folderKind.Check(map[string]string{"path": dir}, Env{Limits: DefaultLimits()})
	require.Equal(t, BadSettings, CodeOf(err))
}
