package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

// newGitRepo is an empty repository on branch main in a temporary
// directory (the test is skipped where git is not installed).
func newGitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := filepath.Join(t.TempDir(), "handbook")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	gitRun(t, repo, "init", "-q", "-b", "main")
	return repo
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

func gitCommitFiles(t *testing.T, dir string, files map[string]string, remove ...string) {
	t.Helper()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	for _, name := range remove {
		gitRun(t, dir, "rm", "-q", name)
	}
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "change")
}

func sourcesConfig() server.Config {
	cfg := testConfig()
	cfg.Sources.AllowLoopback = true
	cfg.Sources.Limits.RequestEvery = 0
	return cfg
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func listedSource(t *testing.T, c searchv1.SearchServiceClient, name string) *searchv1.Source {
	t.Helper()
	resp, err := c.ListSources(callCtx(t), &searchv1.ListSourcesRequest{})
	require.NoError(t, err)
	for _, s := range resp.GetSources() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// A git source end to end: added, synced on demand (its documents become
// searchable), synced again after a change and a deletion, then failing (its
// repository gone: the documents stay, the error shows), then removed with
// its documents. A client may not sync a source the service syncs.
func TestGitSourceLifecycle(t *testing.T) {
	repo := newGitRepo(t)
	gitCommitFiles(t, repo, map[string]string{
		"oncall.md":  "# On call\n\nPage the narwhal team when the queue backs up.",
		"release.md": "# Release\n\nThe release train leaves every Tuesday with the narwhal build.",
	})
	pool, _ := newDB(t)
	r := startReplica(t, pool, sourcesConfig())
	c := r.client

	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "handbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo, "token": "x"}})
	requireCode(t, err, codes.InvalidArgument)
	_, err = c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "handbook", Kind: "svn", Settings: map[string]string{"url": "x"}})
	requireCode(t, err, codes.InvalidArgument)
	added, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "handbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}})
	require.NoError(t, err)
	require.Equal(t, "git", added.GetSource().GetKind())
	require.Equal(t, "file://"+repo, added.GetSource().GetSettings()["url"])
	_, err = c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "handbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}})
	requireCode(t, err, codes.AlreadyExists)

	run, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsWritten())
	require.Equal(t, []string{"handbook:oncall.md", "handbook:release.md"}, bm25IDs(t, c, "narwhal"))

	_, err = sendAll(t, c, syncHeader("handbook"), doc(md("x.md", "", "X", "# X\n\nclient narwhal")))
	requireCode(t, err, codes.FailedPrecondition)

	// A source's default access list reaches every document it syncs; a
	// malformed one is refused and records nothing.
	_, err = c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "hrbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}, DefaultAccess: &searchv1.AccessList{Principals: []string{"team:hr"}}})
	requireCode(t, err, codes.InvalidArgument)
	require.Nil(t, listedSource(t, c, "hrbook"))
	_, err = c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "hrbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}, DefaultAccess: &searchv1.AccessList{Principals: []string{"group:hr"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"group:hr"}, listedSource(t, c, "hrbook").GetDefaultAccess())
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "hrbook"})
	require.NoError(t, err)
	as := func(set ...string) []string {
		resp := search(t, c, &searchv1.SearchRequest{Query: "narwhal", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25,
			Scope: &searchv1.ReadScope{Access: set}})
		ids := dedupe(docIDs(resp))
		sort.Strings(ids)
		return ids
	}
	require.Equal(t, []string{"handbook:oncall.md", "handbook:release.md", "hrbook:oncall.md", "hrbook:release.md"}, as("group:hr"))
	require.Equal(t, []string{"handbook:oncall.md", "handbook:release.md"}, as("group:legal"))
	removed, err := c.RemoveSource(callCtx(t), &searchv1.RemoveSourceRequest{Name: "hrbook"})
	require.NoError(t, err)
	require.EqualValues(t, 2, removed.GetDocumentsDeleted())

	gitCommitFiles(t, repo, map[string]string{"oncall.md": "# On call\n\nPage the walrus team now."}, "release.md")
	run, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsWritten())
	require.EqualValues(t, 1, run.GetDocumentsDeleted())
	require.Empty(t, bm25IDs(t, c, "narwhal"))
	require.Equal(t, []string{"handbook:oncall.md"}, bm25IDs(t, c, "walrus"))

	require.NoError(t, os.Rename(repo, repo+"-moved"))
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	requireCode(t, err, codes.FailedPrecondition)
	require.Equal(t, []string{"handbook:oncall.md"}, bm25IDs(t, c, "walrus"), "a failed run deletes nothing")
	src := listedSource(t, c, "handbook")
	require.Equal(t, "failed", src.GetLastStatus())
	require.NotEmpty(t, src.GetLastError())
	require.EqualValues(t, 1, src.GetConsecutiveFailures())
	require.EqualValues(t, 1, src.GetDocumentCount())

	removed, err = c.RemoveSource(callCtx(t), &searchv1.RemoveSourceRequest{Name: "handbook"})
	require.NoError(t, err)
	require.EqualValues(t, 1, removed.GetDocumentsDeleted())
	require.Empty(t, bm25IDs(t, c, "walrus"))
	require.Nil(t, listedSource(t, c, "handbook"))
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	requireCode(t, err, codes.NotFound)
}

// The runner syncs a scheduled source without being asked, records the
// run, and a source leased by another run is not run twice.
func TestSourceRunnerAndLease(t *testing.T) {
	site := http.NewServeMux()
	var srvURL string
	site.HandleFunc("/sitemap.xml", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<urlset><url><loc>%s/guide</loc></url></urlset>`, srvURL)
	})
	site.HandleFunc("/guide", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><nav>Home About Contact</nav><main><h1>Guide</h1><p>The okapi guide explains grazing.</p></main></body></html>`)
	})
	srv := httptest.NewServer(site)
	defer srv.Close()
	srvURL = srv.URL

	pool, _ := newDB(t)
	cfg := sourcesConfig()
	cfg.SourcesRunner = true
	cfg.SourcesPoll = time.Second
	r := startReplica(t, pool, cfg)
	c := r.client
	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "site", Kind: "web",
		Settings: map[string]string{"url": srv.URL + "/sitemap.xml"}, EverySeconds: 3600})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return listedSource(t, c, "site").GetLastStatus() == "ok"
	}, 30*time.Second, 50*time.Millisecond)
	src := listedSource(t, c, "site")
	require.EqualValues(t, 1, src.GetLastWritten())
	require.EqualValues(t, 3600, src.GetEverySeconds())
	require.True(t, src.GetNextRunAt().AsTime().After(src.GetLastRunAt().AsTime()))
	require.Equal(t, []string{"site:" + srv.URL + "/guide"}, bm25IDs(t, c, "okapi"))
	require.Empty(t, bm25IDs(t, c, "contact"), "the page's navigation is boilerplate, left out by the HTML extractor")

	leaseOtherRun(t, pool, "site")
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "site"})
	requireCode(t, err, codes.Aborted)
	_, err = c.RemoveSource(callCtx(t), &searchv1.RemoveSourceRequest{Name: "site"})
	requireCode(t, err, codes.Aborted)
	require.True(t, listedSource(t, c, "site").GetRunning())
}

// leaseOtherRun makes the source look run by another replica.
func leaseOtherRun(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	_, err := pool.Exec(callCtx(t), `UPDATE search.sources SET lease_owner = 'other-replica', lease_until = now() + interval '1 hour' WHERE name = $1`, name)
	require.NoError(t, err)
}

// A web source keeps what it could not fetch: a page answering 500 stays
// (left out, counted failed), a sitemap that cannot be read fails the run
// and deletes nothing; a page dropped from the sitemap, or answering 410,
// is deleted.
func TestWebSourceKeepsWhatItCouldNotFetch(t *testing.T) {
	var mu sync.Mutex
	listed := []string{"/a", "/b"}
	status := map[string]int{"/a": http.StatusOK, "/b": http.StatusOK, "/sitemap.xml": http.StatusOK}
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		code, ok := status[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if code != http.StatusOK {
			http.Error(w, "no", code)
			return
		}
		if r.URL.Path == "/sitemap.xml" {
			fmt.Fprint(w, `<urlset>`)
			for _, p := range listed {
				fmt.Fprintf(w, `<url><loc>%s%s</loc></url>`, srvURL, p)
			}
			fmt.Fprint(w, `</urlset>`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><main><h1>Page %s</h1><p>The tapir page %s.</p></main></body></html>`, r.URL.Path, r.URL.Path)
	}))
	defer srv.Close()
	srvURL = srv.URL
	set := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }

	pool, _ := newDB(t)
	c := startReplica(t, pool, sourcesConfig()).client
	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "site", Kind: "web",
		Settings: map[string]string{"url": srv.URL + "/sitemap.xml"}})
	require.NoError(t, err)
	both := []string{"site:" + srv.URL + "/a", "site:" + srv.URL + "/b"}
	syncSite := func() (*searchv1.SyncSourceResponse, error) {
		return c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "site"})
	}

	run, err := syncSite()
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsWritten())
	require.Equal(t, both, bm25IDs(t, c, "tapir"))

	set(func() { status["/b"] = http.StatusInternalServerError })
	run, err = syncSite()
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsFailed())
	require.EqualValues(t, 0, run.GetDocumentsDeleted())
	require.Contains(t, run.GetFailures()[0].GetReason(), "answered 500")
	require.Equal(t, both, bm25IDs(t, c, "tapir"))

	set(func() { status["/sitemap.xml"] = http.StatusBadGateway; listed = nil })
	_, err = syncSite()
	requireCode(t, err, codes.FailedPrecondition)
	require.Equal(t, both, bm25IDs(t, c, "tapir"), "a sitemap that cannot be read deletes nothing")

	set(func() {
		status["/sitemap.xml"] = http.StatusOK
		status["/a"] = http.StatusGone
		listed = []string{"/a"}
	})
	run, err = syncSite()
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsDeleted(), "410 and dropped from the sitemap")
	require.Empty(t, bm25IDs(t, c, "tapir"))
}

// A complete listing that comes back empty while the source holds
// documents (an unmounted volume, say) fails the run and deletes nothing;
// removing the source is the way to drop them. A source that never held a
// document may list nothing.
func TestSourceEmptyListingDeletesNothing(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "volume")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	pool, _ := newDB(t)
	cfg := sourcesConfig()
	cfg.Sources.FolderRoot = root
	c := startReplica(t, pool, cfg).client
	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "volume", Kind: "folder", Settings: map[string]string{"path": dir}})
	require.NoError(t, err)
	run, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	require.NoError(t, err, "an empty source that holds nothing syncs")
	require.EqualValues(t, 0, run.GetDocumentsWritten())

	for _, name := range []string{"a.md", "b.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("# "+name+"\n\nthe ocelot ledger"), 0o644))
	}
	run, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsWritten())

	for _, name := range []string{"a.md", "b.md"} {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
	}
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	requireCode(t, err, codes.FailedPrecondition)
	require.Contains(t, err.Error(), "the listing is empty; refusing to delete all 2 documents: remove the source to drop them")
	require.Equal(t, []string{"volume:a.md", "volume:b.md"}, bm25IDs(t, c, "ocelot"))
	src := listedSource(t, c, "volume")
	require.Equal(t, "failed", src.GetLastStatus())
	require.Contains(t, src.GetLastError(), "refusing to delete all 2 documents")

	removed, err := c.RemoveSource(callCtx(t), &searchv1.RemoveSourceRequest{Name: "volume"})
	require.NoError(t, err)
	require.EqualValues(t, 2, removed.GetDocumentsDeleted())
	require.Empty(t, bm25IDs(t, c, "ocelot"))
}

// Every sources call that takes a name checks its format before anything
// else: a malformed name is INVALID_ARGUMENT, not NOT_FOUND.
func TestSourceCallsRefuseMalformedNames(t *testing.T) {
	pool, _ := newDB(t)
	c := startReplica(t, pool, sourcesConfig()).client
	for _, name := range []string{"", "Handbook", "-x", "a/b", strings.Repeat("a", 65)} {
		_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: name, Kind: "git", Settings: map[string]string{"url": "https://example.com/x.git"}})
		requireCode(t, err, codes.InvalidArgument)
		_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: name})
		requireCode(t, err, codes.InvalidArgument)
		require.Contains(t, err.Error(), "is not a source name")
		_, err = c.RemoveSource(callCtx(t), &searchv1.RemoveSourceRequest{Name: name})
		requireCode(t, err, codes.InvalidArgument)
	}
}

// A sync on demand runs in the caller's call (docs/SOURCES.md): when the
// call's deadline passes, as the gateway's request timeout does over REST,
// the run stops, records a failure and deletes nothing.
func TestSyncSourceEndsWithTheCall(t *testing.T) {
	var mu sync.Mutex
	slow := false
	srvURL := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hold := slow && r.URL.Path == "/b"
		mu.Unlock()
		switch {
		case r.URL.Path == "/sitemap.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%s/a</loc></url><url><loc>%s/b</loc></url></urlset>`, srvURL, srvURL)
		case r.URL.Path == "/a" || r.URL.Path == "/b":
			if hold {
				<-r.Context().Done() // answers only once the run gave up
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><body><main><h1>%s</h1><p>The quokka page %s.</p></main></body></html>`, r.URL.Path, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	pool, _ := newDB(t)
	c := startReplica(t, pool, sourcesConfig()).client
	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "site", Kind: "web", Settings: map[string]string{"url": srv.URL + "/sitemap.xml"}})
	require.NoError(t, err)
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "site"})
	require.NoError(t, err)
	both := []string{"site:" + srv.URL + "/a", "site:" + srv.URL + "/b"}
	require.Equal(t, both, bm25IDs(t, c, "quokka"))

	mu.Lock()
	slow = true
	mu.Unlock()
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.SyncSource(short, &searchv1.SyncSourceRequest{Name: "site"})
	requireCode(t, err, codes.DeadlineExceeded)
	require.Eventually(t, func() bool { return listedSource(t, c, "site").GetLastStatus() == "failed" },
		30*time.Second, 20*time.Millisecond, "the run ended with the call and recorded its failure")
	require.Contains(t, listedSource(t, c, "site").GetLastError(), "the call ended before the run finished", "the caller's deadline is named, not the database or the run timeout")
	require.Equal(t, both, bm25IDs(t, c, "quokka"), "nothing deleted")
}

// What a run skipped (over the sources' file limit) or the service refused
// (over its document limit) is offered again by the next run, though the
// repository did not change: once the limits are raised, both are written.
// A run that takes everything leaves nothing to retry.
func TestSourceRetriesWhatARunRefused(t *testing.T) {
	repo := newGitRepo(t)
	gitCommitFiles(t, repo, map[string]string{
		"ok.md":     "# OK\n\nThe heron runbook.",
		"bigdoc.md": "# Big\n\nheron " + strings.Repeat("word ", 600),   // ~3 KB
		"huge.md":   "# Huge\n\nheron " + strings.Repeat("word ", 1600), // ~8 KB
	})
	pool, _ := newDB(t)
	tight := sourcesConfig()
	tight.MaxDocumentBytes = 2048
	tight.Sources.Limits.MaxFileBytes = 4096
	r := startReplica(t, pool, tight)
	_, err := r.client.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "rb", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}})
	require.NoError(t, err)
	run, err := r.client.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "rb"})
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsWritten())
	require.EqualValues(t, 2, run.GetDocumentsFailed())
	require.Equal(t, []string{"rb:ok.md"}, bm25IDs(t, r.client, "heron"))

	// The same commit, on a replica with the default limits.
	wide := startReplica(t, pool, sourcesConfig())
	run, err = wide.client.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "rb"})
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsWritten())
	require.Zero(t, run.GetDocumentsFailed())
	require.Equal(t, []string{"rb:bigdoc.md", "rb:huge.md", "rb:ok.md"}, bm25IDs(t, wide.client, "heron"))

	run, err = wide.client.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "rb"})
	require.NoError(t, err)
	require.Zero(t, run.GetDocumentsWritten()+run.GetDocumentsFailed()+run.GetDocumentsUnchanged(), "nothing left to retry")
}

// A file whose name starts with a space is stored under its id trimmed (as
// every document id is): the run that writes it keeps it, later runs find
// it unchanged, and a refusal of such a file is retried like any other.
func TestSourceFileNamesWithSpaces(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "volume")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write(" lead.md", "# Lead\n\nthe pangolin memo")
	write("plain.md", "# Plain\n\nthe pangolin notes")
	write(" big.md", "# Big\n\npangolin "+strings.Repeat("word ", 600))
	pool, _ := newDB(t)
	tight := sourcesConfig()
	tight.Sources.FolderRoot = root
	tight.MaxDocumentBytes = 2048
	c := startReplica(t, pool, tight).client
	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "volume", Kind: "folder", Settings: map[string]string{"path": dir}})
	require.NoError(t, err)
	run, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	require.NoError(t, err)
	require.EqualValues(t, 2, run.GetDocumentsWritten())
	require.EqualValues(t, 1, run.GetDocumentsFailed())
	require.Zero(t, run.GetDocumentsDeleted())
	require.Equal(t, []string{"volume:lead.md", "volume:plain.md"}, bm25IDs(t, c, "pangolin"))

	wide := sourcesConfig()
	wide.Sources.FolderRoot = root
	c = startReplica(t, pool, wide).client
	run, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsWritten(), "the refused file, retried")
	require.EqualValues(t, 2, run.GetDocumentsUnchanged())
	require.Zero(t, run.GetDocumentsDeleted())
	require.Equal(t, []string{"volume:big.md", "volume:lead.md", "volume:plain.md"}, bm25IDs(t, c, "pangolin"))

	require.NoError(t, os.Remove(filepath.Join(dir, " lead.md")))
	run, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "volume"})
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsDeleted())
	require.Equal(t, []string{"volume:big.md", "volume:plain.md"}, bm25IDs(t, c, "pangolin"))
}

// A file whose name holds a control character would be stored under an id
// no lookup accepts (platform/docid): a folder or git source reports it as
// that file's failure, by its name, and syncs the others; each run offers
// it again, and it never costs the other files or the run's deletions.
func TestSourceFileNamesWithControlCharacters(t *testing.T) {
	const bad, esc = "line\nbreak.md", "esc\x1b[2J.md"
	files := map[string]string{"ok.md": "# OK\n\nThe okapi memo.", bad: "# Bad\n\nThe okapi notes.", esc: "# Esc\n\nThe okapi log."}
	root := t.TempDir()
	dir := filepath.Join(root, "volume")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	repo := newGitRepo(t)
	gitCommitFiles(t, repo, files)
	pool, _ := newDB(t)
	cfg := sourcesConfig()
	cfg.Sources.FolderRoot = root
	c := startReplica(t, pool, cfg).client
	for _, src := range []struct {
		name, kind string
		settings   map[string]string
	}{
		{"volume", "folder", map[string]string{"path": dir}},
		{"repo", "git", map[string]string{"url": "file://" + repo}},
	} {
		t.Run(src.kind, func(t *testing.T) {
			_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: src.name, Kind: src.kind, Settings: src.settings})
			require.NoError(t, err)
			for run := range 2 {
				resp, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: src.name})
				require.NoError(t, err)
				require.EqualValues(t, 1-run, resp.GetDocumentsWritten(), "run %d", run)
				require.EqualValues(t, 2, resp.GetDocumentsFailed(), "run %d: refused again", run)
				failed := map[string]string{}
				for _, f := range resp.GetFailures() {
					failed[f.GetSourceFile()] = f.GetReason()
					require.Equal(t, src.name+":"+f.GetSourceFile(), f.GetExternalId())
				}
				require.Equal(t, map[string]string{
					bad: "external_id must not contain control characters",
					esc: "external_id must not contain control characters",
				}, failed)
				require.Zero(t, resp.GetDocumentsDeleted())
			}
		})
	}
	// A later commit reaches the run as a diff, which lists such a name too.
	gitCommitFiles(t, repo, map[string]string{"tab\tname.md": "# Tab\n\nThe okapi list.", "new.md": "# New\n\nThe okapi plan."})
	resp, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "repo"})
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.GetDocumentsWritten())
	require.EqualValues(t, 3, resp.GetDocumentsFailed(), "%v", resp.GetFailures())
	require.Equal(t, []string{"repo:new.md", "repo:ok.md", "volume:ok.md"}, bm25IDs(t, c, "okapi"))
}
