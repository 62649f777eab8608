package sources

import (
	"context"
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

// A symbolic link cannot take a folder source outside the root: a path
// through a link that leads out is refused when the source is added and at
// each run (the link may appear later), and links met while walking are
// not followed, wherever they lead. A root reached through a link is fine.
func TestFolderSourceSymlinks(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "volume")
	outside := filepath.Join(base, "secrets")
	dir := filepath.Join(root, "handbook")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "key.md"), []byte("# Key\n\nsecret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "sub", "more.md"), []byte("# More\n\nsecret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), []byte("# A\n\nalpha"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "linked-folder")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "key.md"), filepath.Join(dir, "linked-file.md")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "a.md"), filepath.Join(dir, "inside-link.md")))
	env := Env{Limits: DefaultLimits(), FolderRoot: root}

	for _, p := range []string{filepath.Join(root, "escape"), filepath.Join(root, "escape", "sub")} {
		_, err := folderKind.Check(map[string]string{"path": p}, env)
		require.Equal(t, BadSettings, CodeOf(err), "%s: %v", p, err)
		_, err = folderKind.Fetch(context.Background(), Request{Name: "t", Settings: map[string]string{"path": p}, Env: env})
		require.Equal(t, BadSettings, CodeOf(err), "%s: %v", p, err)
	}

	cs := fetchOK(t, folderKind, map[string]string{"path": dir}, nil, env)
	require.Equal(t, []string{"a.md"}, upsertIDs(cs))

	// The configured root itself may be a link (a mount point, say).
	rootLink := filepath.Join(base, "mnt")
	require.NoError(t, os.Symlink(root, rootLink))
	viaLink := Env{Limits: DefaultLimits(), FolderRoot: rootLink}
	cs = fetchOK(t, folderKind, map[string]string{"path": filepath.Join(rootLink, "handbook")}, nil, viaLink)
	require.Equal(t, []string{"a.md"}, upsertIDs(cs))
	_, err := folderKind.Check(map[string]string{"path": filepath.Join(rootLink, "escape")}, viaLink)
	require.Equal(t, BadSettings, CodeOf(err))
}
