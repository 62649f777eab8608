package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
)

func zipOf(t *testing.T, files map[string]string) string {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range files {
		w, err := zw.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return b.String()
}

// The upload route puts one file or a zip's files into a named source
// through the real search service, for the ingest credential only, and
// refuses unsafe or oversized archives with a clear error.
func TestUploadAgainstServices(t *testing.T) {
	s := newStack(t, map[string]string{"BMCIS_GATEWAY_MAX_UPLOAD_BYTES": "1048576"})
	key := s.createKey(`{"name":"e2e-upload"}`)
	ingest := []string{rest.HeaderAdminToken, ingestToken}

	r := s.do("POST", "/v1/sources/uploads/files?file=guide.md", "# Guide\n\nThe upload wombat guide.\n", ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"documentsWritten":1`)

	r = s.do("POST", "/v1/sources/uploads/files?file=docs.zip", zipOf(t, map[string]string{
		"a/one.md":          "# One\n\nThe zipped wombat one.\n",
		"a/page.html":       "<html><head><title>Page</title></head><body><main><h1>Page</h1><p>The zipped wombat page.</p></main></body></html>",
		".hidden/x.md":      "# Hidden\n\nnot sent\n",
		"__MACOSX/a/._x.md": "resource fork",
		"image.png":         "\x89PNG not a document",
	}), ingest...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var raw struct {
		DocumentsReceived int `json:"documentsReceived"`
		DocumentsWritten  int `json:"documentsWritten"`
		Failures          []struct {
			SourceFile string `json:"sourceFile"`
			Reason     string `json:"reason"`
		} `json:"failures"`
	}
	require.NoError(t, json.Unmarshal(r.body, &raw))
	require.Equal(t, 3, raw.DocumentsReceived, "hidden files are skipped: %s", r.body)
	require.Equal(t, 2, raw.DocumentsWritten)
	require.Len(t, raw.Failures, 1)
	require.Equal(t, "image.png", raw.Failures[0].SourceFile)
	require.Contains(t, raw.Failures[0].Reason, "not a file of a known format")

	r = s.do("POST", "/v1/search", `{"query":"wombat","mode":"RETRIEVAL_MODE_BM25","limit":10}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for _, id := range []string{"uploads:guide.md", "uploads:a/one.md", "uploads:a/page.html"} {
		require.Contains(t, string(r.body), `"documentId":"`+id+`"`)
	}
	r = s.do("GET", "/v1/sources", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"name":"uploads"`)
	require.Contains(t, string(r.body), `"documentCount":3`)

	bomb := zipOf(t, map[string]string{"big.md": strings.Repeat("0", 3<<20)}) // 3 MiB of zeros, a few KB zipped
	require.Less(t, len(bomb), 64<<10)
	for _, c := range []struct {
		name, path, body string
		headers          []string
		status           int
		want             string
	}{
		{"read credential", "/v1/sources/uploads/files?file=x.md", "# X", []string{rest.HeaderAdminToken, serviceToken}, http.StatusForbidden, ""},
		{"no credential", "/v1/sources/uploads/files?file=x.md", "# X", nil, http.StatusUnauthorized, "ADMIN_TOKEN_REQUIRED"},
		{"wrong credential", "/v1/sources/uploads/files?file=x.md", "# X", []string{rest.HeaderAdminToken, "junk"}, http.StatusUnauthorized, "ADMIN_TOKEN_INVALID"},
		{"admin credential", "/v1/sources/uploads/files?file=x.md", "# X", []string{rest.HeaderAdminToken, adminToken}, http.StatusForbidden, "ADMIN_TOKEN_INVALID"},
		{"unknown format", "/v1/sources/uploads/files?file=x.exe", "MZ", ingest, http.StatusBadRequest, "UPLOAD_REJECTED"},
		{"empty file", "/v1/sources/uploads/files?file=empty.md", "", ingest, http.StatusBadRequest, "empty document"},
		{"no file name", "/v1/sources/uploads/files", "# X", ingest, http.StatusBadRequest, "?file="},
		{"traversal in name", "/v1/sources/uploads/files?file=../x.md", "# X", ingest, http.StatusBadRequest, "path traversal"},
		{"traversal in zip", "/v1/sources/uploads/files?file=a.zip", zipOf(t, map[string]string{"../../etc/x.md": "# X"}), ingest, http.StatusBadRequest, "path traversal"},
		{"absolute in zip", "/v1/sources/uploads/files?file=a.zip", zipOf(t, map[string]string{"/etc/x.md": "# X"}), ingest, http.StatusBadRequest, "absolute"},
		{"zip bomb", "/v1/sources/uploads/files?file=a.zip", bomb, ingest, http.StatusBadRequest, "at most 1048576 per file"},
		{"not a zip", "/v1/sources/uploads/files?file=a.zip", "plain text", ingest, http.StatusBadRequest, "not a zip archive"},
		{"too large", "/v1/sources/uploads/files?file=x.md", strings.Repeat("x", 2<<20), ingest, http.StatusRequestEntityTooLarge, "larger than 1048576"},
		{"bad source name", "/v1/sources/Bad%20Name/files?file=x.md", "# X", ingest, http.StatusBadRequest, "not a source name"},
		{"a form upload (curl -F)", "/v1/sources/uploads/files?file=form.md", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"form.md\"\r\n\r\n# Form\r\n--b--\r\n",
			append([]string{"Content-Type", "multipart/form-data; boundary=b"}, ingest...), http.StatusUnsupportedMediaType, "--data-binary"},
		{"name not UTF-8", "/v1/sources/uploads/files?file=%FF.md", "# X", ingest, http.StatusBadRequest, "BAD_UPLOAD"},
		{"zip entry not UTF-8", "/v1/sources/uploads/files?file=a.zip", zipOf(t, map[string]string{"caf\x82.md": "# X"}), ingest, http.StatusBadRequest, "BAD_ZIP"},
		// platform/docid's control characters, C1 included: a zip is refused whole.
		{"control character in name", "/v1/sources/uploads/files?file=a%1Bb.md", "# X", ingest, http.StatusBadRequest, "control characters are not allowed"},
		{"C1 control in name", "/v1/sources/uploads/files?file=a%C2%85b.md", "# X", ingest, http.StatusBadRequest, "control characters are not allowed"},
		{"C1 control in zip", "/v1/sources/uploads/files?file=a.zip", zipOf(t, map[string]string{"ok.md": "# OK\n\nThe upload wombat extra.\n", "a\u0085b.md": "# X"}), ingest, http.StatusBadRequest, "BAD_ZIP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.do("POST", c.path, c.body, c.headers...)
			require.Equal(t, c.status, r.status, "%s", r.body)
			require.Contains(t, string(r.body), c.want)
		})
	}

	r = s.do("GET", "/v1/sources", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"documentCount":3`, "a refused upload added a document: %s", r.body)

	// An archive refused for an entry found broken while reading (a CRC
	// mismatch, or one inflating past its declared size) is refused whole:
	// the entries before it are not written either.
	broken := []byte(storedZipOf(t, []string{"first.md", "second.md"}, []string{"# First\n\nThe quokka first.\n", "# Second\n\nThe quokka second.\n"}))
	i := bytes.Index(broken, []byte("quokka second"))
	require.Positive(t, i)
	broken[i] = 'Q' // the stored bytes no longer match the entry's CRC-32
	r = s.do("POST", "/v1/sources/atomic/files?file=b.zip", string(broken), ingest...)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "BAD_ZIP")
	require.Contains(t, string(r.body), "second.md")
	r = s.do("POST", "/v1/search", `{"query":"quokka","mode":"RETRIEVAL_MODE_BM25","limit":10}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), "atomic:first.md", "a refused archive left a file behind")
}

// storedZipOf is a zip of names[i] holding bodies[i] in order, stored
// uncompressed, so a test can damage an entry's bytes in place.
func storedZipOf(t *testing.T, names, bodies []string) string {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i, name := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		require.NoError(t, err)
		_, err = w.Write([]byte(bodies[i]))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return b.String()
}
