package sources

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// testRepo is a real repository made by the git binary.
type testRepo struct {
	t   *testing.T
	dir string
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	r := &testRepo{t: t, dir: filepath.Join(t.TempDir(), "handbook")}
	require.NoError(t, os.MkdirAll(r.dir, 0o755))
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *testRepo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
}

func (r *testRepo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), 0o644))
}

func (r *testRepo) commit(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

// gitHTTPServer serves dir's repositories by git http-backend.
func gitHTTPServer(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skip("git http-backend is not installed")
	}
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
		Stderr: io.Discard, Logger: log.New(io.Discard, "", 0)}) // a fetch cut at its limit breaks the pipe
	t.Cleanup(srv.Close)
	return srv
}

func testEnv() Env {
	return Env{Limits: DefaultLimits(), AllowLoopback: true}
}

func upsertIDs(cs *ChangeSet) []string {
	var ids []string
	for _, f := range cs.Upserts {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func fetchOK(t *testing.T, k *Kind, settings map[string]string, cursor []byte, env Env) *ChangeSet {
	t.Helper()
	s, err := k.Check(settings, env)
	require.NoError(t, err)
	cs, err := k.Fetch(context.Background(), Request{Name: "t", Settings: s, Cursor: cursor, Env: env})
	require.NoError(t, err)
	return cs
}

// The first run lists the folder's documents; the next diffs the last
// synced commit against the head: a change, a rename and a deletion move
// exactly those files.
func TestGitFileRepositoryIncremental(t *testing.T) {
	r := newTestRepo(t)
	r.write("docs/a.md", "# A\n\nalpha")
	r.write("docs/b.md", "# B\n\nbravo")
	r.write("docs/c.md", "# C\n\ncharlie")
	r.write("docs/tool.go", "package tool") // not a document format
	r.write("other/x.md", "# X\n\noutside the path")
	r.commit("first")
	env := testEnv()
	settings := map[string]string{"url": "file://" + r.dir, "path": "/docs/"}

	first := fetchOK(t, gitKind, settings, nil, env)
	require.True(t, first.Full)
	require.Equal(t, []string{"a.md", "b.md", "c.md"}, upsertIDs(first))
	require.Empty(t, first.Deletes)
	require.Empty(t, first.Upserts[0].Category, "a file at the source's root has no category")

	r.write("docs/a.md", "# A\n\nalpha, edited")
	r.git("mv", "docs/b.md", "docs/renamed.md")
	r.git("rm", "-q", "docs/c.md")
	r.commit("second")
	second := fetchOK(t, gitKind, settings, first.Cursor, env)
	require.False(t, second.Full)
	require.Equal(t, []string{"a.md", "renamed.md"}, upsertIDs(second))
	deletes := append([]string(nil), second.Deletes...)
	sort.Strings(deletes)
	require.Equal(t, []string{"b.md", "c.md"}, deletes)
	require.NotEqual(t, string(first.Cursor), string(second.Cursor))

	// Nothing new: an empty change set.
	third := fetchOK(t, gitKind, settings, second.Cursor, env)
	require.Empty(t, third.Upserts)
	require.Empty(t, third.Deletes)
}

// A file over the size limit is skipped with its reason, not fetched, and
// the run goes on.
func TestGitSkipsHugeFiles(t *testing.T) {
	r := newTestRepo(t)
	r.write("small.md", "# Small\n\nok")
	r.write("huge.md", strings.Repeat("x", 4096))
	r.commit("first")
	env := testEnv()
	env.Limits.MaxFileBytes = 1024
	cs := fetchOK(t, gitKind, map[string]string{"url": "file://" + r.dir}, nil, env)
	require.Equal(t, []string{"small.md"}, upsertIDs(cs))
	require.Len(t, cs.Skipped, 1)
	require.Equal(t, "huge.md", cs.Skipped[0].ID)
	require.Contains(t, cs.Skipped[0].Reason, "too large")
}

// Smart HTTP from git http-backend, behind basic auth: the token given by
// reference works; a wrong one is an auth failure that never shows the
// token; a missing repository is unreachable.
func TestGitSmartHTTPWithToken(t *testing.T) {
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skip("git http-backend is not installed")
	}
	r := newTestRepo(t)
	r.write("runbook.md", "# Runbook\n\nrestart the walrus")
	r.commit("first")
	const token = "s3cret-token-value"
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.dir), "GIT_HTTP_EXPORT_ALL=1"}, Stderr: io.Discard}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, req)
	}))
	defer srv.Close()

	env := testEnv()
	env.Lookup = func(name string) (string, bool) {
		switch name {
		case "SOURCE_TOKEN_GIT":
			return token, true
		case "SOURCE_TOKEN_WRONG":
			return "not-" + token, true
		}
		return "", false
	}
	url := srv.URL + "/handbook"
	cs := fetchOK(t, gitKind, map[string]string{"url": url, "token_ref": "env:SOURCE_TOKEN_GIT"}, nil, env)
	require.Equal(t, []string{"runbook.md"}, upsertIDs(cs))
	require.Contains(t, string(cs.Upserts[0].Content), "walrus")

	s, err := gitKind.Check(map[string]string{"url": url, "token_ref": "env:SOURCE_TOKEN_WRONG"}, env)
	require.NoError(t, err)
	_, err = gitKind.Fetch(context.Background(), Request{Settings: s, Env: env})
	require.Error(t, err)
	require.Equal(t, AuthFailed, CodeOf(err), "%v", err)
	require.NotContains(t, err.Error(), token)

	s, err = gitKind.Check(map[string]string{"url": srv.URL + "/missing", "token_ref": "env:SOURCE_TOKEN_GIT"}, env)
	require.NoError(t, err)
	_, err = gitKind.Fetch(context.Background(), Request{Settings: s, Env: env})
	require.Error(t, err)
	require.Equal(t, Unreachable, CodeOf(err), "%v", err)
	require.NotContains(t, err.Error(), token)
}

// Settings are refused before anything is stored: a token in the URL, an
// unknown key, a token itself instead of a reference, file:// outside
// development.
func TestGitSettingsRefused(t *testing.T) {
	env := testEnv()
	for _, s := range []map[string]string{
		{"url": "https://user:tok@example.com/r.git"},
		{"url": "https://example.com/r.git?access_token=tok"},
		{"url": "https://example.com/r.git", "token": "tok"},
		{"url": "https://example.com/r.git", "token_ref": "ghp_abcdef"},
		{"url": "ssh://git@example.com/r.git"},
		{"url": "https://example.com/r.git", "path": "../etc"},
	} {
		_, err := gitKind.Check(s, env)
		require.Error(t, err, "%v", s)
		require.Equal(t, BadSettings, CodeOf(err))
		require.NotContains(t, err.Error(), "tok@")
	}
	_, err := gitKind.Check(map[string]string{"url": "file:///srv/repo"}, Env{Limits: DefaultLimits()})
	require.Equal(t, BadSettings, CodeOf(err))
}

// A token reference may not name the service's own configuration: with
// token_ref env:DATABASE_URL (or file:/proc/self/environ) and a URL of
// their choosing, an operator's ingest credential would send the search
// service's database password to any host. Refused when the source is
// added, and again at each run (for a source stored before this rule).
func TestGitTokenRefNotTheServiceConfiguration(t *testing.T) {
	env := testEnv()
	for _, ref := range []string{"env:DATABASE_URL", "env:REDIS_URL", "env:BMCIS_INGEST_TOKEN_SHA256",
		"file:/proc/self/environ", "file:/etc/../proc/1/environ", "file:/var/run/secrets/kubernetes.io/serviceaccount/token",
		"file:/run/secrets/kubernetes.io/serviceaccount/token", "file:/sys/class/dmi/id/product_uuid",
		// The allow-list: only SOURCE_TOKEN_ variables and files below the secrets directory.
		"env:HANDBOOK_TOKEN", "env:HOME", "env:" + TokenEnvPrefix, "file:/etc/passwd", "file:" + DefaultSecretsDir,
		"file:" + DefaultSecretsDir + "/../../kubernetes.io/serviceaccount/token", "file:" + DefaultSecretsDir + "-other/token"} {
		_, err := gitKind.Check(map[string]string{"url": "https://example.com/r.git", "token_ref": ref}, env)
		require.Equal(t, BadSettings, CodeOf(err), "%s: %v", ref, err)
	}
	_, err := gitKind.Check(map[string]string{"url": "https://example.com/r.git", "token_ref": "env:SOURCE_TOKEN_HANDBOOK"}, env)
	require.NoError(t, err)
	_, err = gitKind.Check(map[string]string{"url": "https://example.com/r.git", "token_ref": "file:" + DefaultSecretsDir + "/handbook/token"}, env)
	require.NoError(t, err)
	own := env
	own.SecretsDir = "/etc/bmcis/source-tokens"
	_, err = gitKind.Check(map[string]string{"url": "https://example.com/r.git", "token_ref": "file:/etc/bmcis/source-tokens/handbook"}, own)
	require.NoError(t, err, "BMCIS_SEARCH_SOURCES_SECRETS_DIR moves the directory")
	_, err = gitKind.Check(map[string]string{"url": "https://example.com/r.git", "token_ref": "file:" + DefaultSecretsDir + "/handbook"}, own)
	require.Equal(t, BadSettings, CodeOf(err))

	const dbPassword = "db-password-7f3a"
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	env.Lookup = func(name string) (string, bool) {
		if name == "DATABASE_URL" {
			return "postgres://search:" + dbPassword + "@db/bmcis", true
		}
		return "", false
	}
	stored := map[string]string{"url": srv.URL + "/r.git", "token_ref": "env:DATABASE_URL"} // as an older version stored it
	_, err = gitKind.Fetch(context.Background(), Request{Settings: stored, Env: env})
	require.Equal(t, BadSettings, CodeOf(err), "%v", err)
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen {
		require.NotContains(t, h, "Basic ", "no credential may be sent")
	}
}

// randomBytes is incompressible content: its pack is as big as it is.
func randomBytes(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return string(b)
}

// A repository whose fetch passes the run's byte limit fails as too large
// while it downloads, over file:// and smart HTTP alike; the same
// repository under a higher limit is fetched.
func TestGitFetchOverTheByteLimitIsTooLarge(t *testing.T) {
	r := newTestRepo(t)
	r.write("guide.md", "# Guide\n\nsmall")
	r.write("assets/blob.bin", randomBytes(t, 512<<10))
	r.commit("first")
	srv := gitHTTPServer(t, filepath.Dir(r.dir))
	for _, url := range []string{"file://" + r.dir, srv.URL + "/handbook"} {
		env := testEnv()
		env.Limits.MaxTotalBytes = 128 << 10
		s, err := gitKind.Check(map[string]string{"url": url}, env)
		require.NoError(t, err)
		_, err = gitKind.Fetch(context.Background(), Request{Settings: s, Env: env})
		require.Equal(t, TooLarge, CodeOf(err), "%s: %v", url, err)
		require.Contains(t, err.Error(), "BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES")

		env.Limits.MaxTotalBytes = 4 << 20
		cs := fetchOK(t, gitKind, map[string]string{"url": url}, nil, env)
		require.Equal(t, []string{"guide.md"}, upsertIDs(cs), url)
	}
}

// A git URL is held to the address rule web sources use: a loopback
// address (by number, by localhost, or by a name resolving to it) without
// the loopback setting, and a private one without the private setting,
// are refused before any connection is made. file:// stored while
// loopback was allowed is refused at the run once it no longer is.
func TestGitRefusesNonPublicAddresses(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusNotFound)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	env := Env{Limits: DefaultLimits()}
	// A literal, or localhost (loopback by RFC 6761), stored before Check
	// refused them, is refused by the settings check each run repeats; any
	// other name when the dialer sees its address (TestWebRefusesNonPublicAddresses:
	// the same dialer).
	for _, tc := range []struct {
		url  string
		code Code
	}{
		{"https://localhost:" + port + "/r.git", BadSettings},
		{"https://127.0.0.1:" + port + "/r.git", BadSettings},
		{"https://10.0.0.1/r.git", BadSettings},
	} {
		_, err = gitKind.Fetch(context.Background(), Request{Settings: map[string]string{"url": tc.url}, Env: env})
		require.Equal(t, tc.code, CodeOf(err), "%s: %v", tc.url, err)
		require.Contains(t, err.Error(), "not public", tc.url)
	}
	mu.Lock()
	require.Zero(t, conns, "no connection reached the server")
	mu.Unlock()

	_, err = gitKind.Fetch(context.Background(), Request{Settings: map[string]string{"url": "file:///srv/repo"}, Env: env})
	require.Equal(t, BadSettings, CodeOf(err), "%v", err)
}

// go-git's HTTP transport is process-wide: a fetch outside a source run
// (no run's rules in its context) is refused, not sent unchecked.
func TestGitHTTPOutsideARunRefused(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/r.git/info/refs", nil)
	require.NoError(t, err)
	_, err = gitRoundTripper{}.RoundTrip(req)
	require.ErrorContains(t, err, "only fetched within a source run")
	mu.Lock()
	require.Zero(t, requests)
	mu.Unlock()
}
