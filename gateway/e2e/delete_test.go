package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// DELETE /v1/documents/{id} addresses synced documents, whose ids are
// NAME:path and so contain slashes for nested files: written as they are,
// or with the slashes percent-encoded.
func TestDeleteSyncedDocumentWithNestedPath(t *testing.T) {
	s := newStack(t, nil)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"top.md":                    "# Top\n\nThe top page about walruses.\n",
		"guides/security/backup.md": "# Backups\n\nThe nested page about narwhals.\n",
		"guides/ops/runbook.md":     "# Runbook\n\nThe nested page about belugas.\n",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	s.st.Ctl(t, "sync", "-addr", s.st.Addr(stacktest.Search), "handbook", dir)

	documents := func() int64 {
		t.Helper()
		r := s.do("GET", "/v1/sources", "", rest.HeaderAPIKey, s.createKey(`{"name":"e2e-sources"}`))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var body struct {
			Sources []struct {
				Name          string `json:"name"`
				DocumentCount int64  `json:"documentCount"`
			} `json:"sources"`
		}
		require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
		require.Len(t, body.Sources, 1, "%s", r.body)
		return body.Sources[0].DocumentCount
	}
	require.EqualValues(t, 3, documents())

	ingest := []string{rest.HeaderAdminToken, ingestToken}
	for _, tc := range []struct {
		name, path string
		left       int64
	}{
		{"slashes as they are", "/v1/documents/handbook:guides/security/backup.md", 2},
		{"slashes percent-encoded", "/v1/documents/handbook:guides%2Fops%2Frunbook.md", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("DELETE", tc.path, "", ingest...)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var deleted struct {
				ChunksDeleted int `json:"chunksDeleted"`
			}
			require.NoError(t, json.Unmarshal(r.body, &deleted))
			require.Positive(t, deleted.ChunksDeleted, "%s", r.body)
			require.EqualValues(t, tc.left, documents())
			r = s.do("DELETE", tc.path, "", ingest...)
			require.Equal(t, http.StatusNotFound, r.status, "gone: %s", r.body)
		})
	}
	// The route still takes only the ingest credential.
	r := s.do("DELETE", "/v1/documents/handbook:top.md", "", rest.HeaderAPIKey, s.createKey(`{"name":"e2e-not-ingest"}`))
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.EqualValues(t, 1, documents())
}
