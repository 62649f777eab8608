package sources

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every kind's Retry makes the next run fetch the given ids again though
// they did not change, and only those; an unreadable cursor comes back
// nil, which a kind reads as a first run.
func TestRetryFetchesAgain(t *testing.T) {
	for _, k := range kinds {
		require.NotNil(t, k.Retry, "kind %s has no Retry", k.Name)
		require.Nil(t, k.Retry([]byte("not json"), []string{"x"}), k.Name)
	}

	t.Run("folder", func(t *testing.T) {
		root := t.TempDir()
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, f := range []string{"a.md", "b.md"} {
			p := filepath.Join(root, f)
			require.NoError(t, os.WriteFile(p, []byte("# "+f+"\n\ntext"), 0o644))
			require.NoError(t, os.Chtimes(p, t0, t0))
		}
		env := Env{Limits: DefaultLimits(), FolderRoot: root}
		settings := map[string]string{"path": root}
		first := fetchOK(t, folderKind, settings, nil, env)
		again := fetchOK(t, folderKind, settings, folderKind.Retry(first.Cursor, []string{"b.md"}), env)
		require.Equal(t, []string{"b.md"}, upsertIDs(again))
		require.Equal(t, []string{"a.md"}, again.Unchanged)
	})

	t.Run("web", func(t *testing.T) {
		s := newSite(t)
		s.set(func(s *site) {
			s.pages["/a"] = page("A", "alpha")
			s.pages["/b"] = page("B", "bravo")
			s.sitemap = []string{"/a", "/b"}
		})
		u := s.srv.URL
		settings := map[string]string{"url": u + "/sitemap.xml"}
		first := fetchOK(t, webKind, settings, nil, fastEnv())
		again := fetchOK(t, webKind, settings, webKind.Retry(first.Cursor, []string{u + "/b"}), fastEnv())
		require.Equal(t, []string{u + "/b"}, upsertIDs(again))
		require.Equal(t, []string{u + "/a"}, again.Unchanged)
	})

	t.Run("git", func(t *testing.T) {
		r := newTestRepo(t)
		r.write("docs/a.md", "# A\n\nalpha")
		r.write("docs/b.md", "# B\n\nbravo")
		r.write("docs/c.md", "# C\n\ncharlie")
		r.commit("first")
		settings := map[string]string{"url": "file://" + r.dir, "path": "docs"}
		first := fetchOK(t, gitKind, settings, nil, testEnv())
		cursor := gitKind.Retry(first.Cursor, []string{"b.md", "c.md", "gone.md"})
		r.write("docs/c.md", "# C\n\ncharlie, edited")
		r.commit("second")
		again := fetchOK(t, gitKind, settings, cursor, testEnv())
		require.Equal(t, []string{"b.md", "c.md"}, upsertIDs(again), "c.md once, though both the diff and the retry list name it")
		require.Len(t, again.Upserts, 2)
		require.Empty(t, again.Skipped)
		require.Empty(t, fetchOK(t, gitKind, settings, again.Cursor, testEnv()).Upserts, "the retry list is spent")
	})
}
