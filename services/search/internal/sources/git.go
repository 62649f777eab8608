package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/bmcis/knowledge/platform/docformat"
	"github.com/bmcis/knowledge/platform/docid"
	"github.com/bmcis/knowledge/platform/weburl"
)

// gitKind mirrors the files of a git repository's branch (optionally one
// folder of it): settings url, branch, path, token_ref, username. The
// cursor is the last synced commit; a run diffs it against the branch's
// head, so only changed, renamed and deleted files move.
var gitKind = &Kind{Name: "git", Check: checkGit, Fetch: fetchGit, Retry: retryGit, Root: func(s map[string]string) string { return s["url"] }}

type gitCursor struct {
	Commit string `json:"commit"`
	// Retry are ids the next run reads from the head tree even when the
	// diff does not touch them (Kind.Retry).
	Retry []string `json:"retry,omitempty"`
}

// retryGit adds ids to the cursor's retry list: a commit alone would only
// offer them again once they change.
func retryGit(cursor []byte, ids []string) []byte {
	var c gitCursor
	if json.Unmarshal(cursor, &c) != nil {
		return nil // an unreadable cursor lists every file, as a first run
	}
	for _, id := range ids {
		if !slices.Contains(c.Retry, id) {
			c.Retry = append(c.Retry, id)
		}
	}
	out, _ := json.Marshal(c)
	return out
}

func checkGit(s map[string]string, env Env) (map[string]string, error) {
	if err := onlyKeys(s, "url", "branch", "path", "token_ref", "username"); err != nil {
		return nil, err
	}
	u, err := url.Parse(s["url"])
	if err != nil || s["url"] == "" {
		return nil, fail(BadSettings, nil, "url: want an https:// (or file://) repository URL")
	}
	if u.User != nil || u.RawQuery != "" {
		return nil, fail(BadSettings, nil, "url: must not carry credentials or a query; give the token by reference (token_ref)")
	}
	switch u.Scheme {
	case "https":
		if err := checkLiteralHost(u, env); err != nil {
			return nil, err
		}
	case "http":
		if !weburl.Loopback(u.Hostname()) || !env.AllowLoopback {
			return nil, fail(BadSettings, nil, "url: plain http only to a loopback host where loopback sources are allowed (BMCIS_SEARCH_SOURCES_ALLOW_LOOPBACK)")
		}
	case "file":
		if !env.AllowLoopback {
			return nil, fail(BadSettings, nil, "url: file:// repositories only where loopback sources are allowed (BMCIS_SEARCH_SOURCES_ALLOW_LOOPBACK)")
		}
	default:
		return nil, fail(BadSettings, nil, "url: scheme %q is not supported (https, or file:// in development)", u.Scheme)
	}
	if ref := s["token_ref"]; ref != "" {
		if err := env.checkSecretRef(ref); err != nil {
			return nil, err
		}
	}
	if p := s["path"]; p != "" {
		clean := path.Clean(strings.Trim(p, "/"))
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fail(BadSettings, nil, "path: %q is not a folder of the repository", p)
		}
		s["path"] = clean
	}
	if b := s["branch"]; b != "" && !plumbing.NewBranchReferenceName(b).IsBranch() {
		return nil, fail(BadSettings, nil, "branch: %q is not a branch name", b)
	}
	return s, nil
}

func fetchGit(ctx context.Context, req Request) (*ChangeSet, error) {
	// Settings stored before a rule existed, or under a setting since
	// turned off (file:// without loopback), are checked again per run.
	s, err := checkGit(maps.Clone(req.Settings), req.Env)
	if err != nil {
		return nil, err
	}
	opts := &git.CloneOptions{URL: s["url"], SingleBranch: true, Tags: git.NoTags, NoCheckout: true}
	if b := s["branch"]; b != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(b)
	}
	if ref := s["token_ref"]; ref != "" {
		token, err := req.Env.Secret(ref)
		if err != nil {
			return nil, err
		}
		user := s["username"]
		if user == "" {
			user = "x-access-token" // what GitHub and most forges accept beside a token
		}
		opts.Auth = &githttp.BasicAuth{Username: user, Password: token}
	}
	// The whole branch history is fetched (the last synced commit must be
	// present to diff against it) into a temporary directory, not memory:
	// the transfer is bounded by the run's byte limit, and a blob over
	// gitLargeObject stays on disk until read, after its size was checked.
	dir, err := os.MkdirTemp("", "bmcis-git-source-*")
	if err != nil {
		return nil, fmt.Errorf("git source: temporary clone directory: %w", err)
	}
	defer os.RemoveAll(dir)
	xfer := newGitTransfer(req.Env)
	st := &gitStorage{Storage: filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(gitObjectCache),
		filesystem.Options{LargeObjectThreshold: gitLargeObject}), xfer: xfer, countPack: strings.HasPrefix(s["url"], "file:")}
	defer st.Close()
	defer xfer.close()
	installGitHTTP.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: gitRoundTripper{}})
		client.InstallProtocol("https", c)
		client.InstallProtocol("http", c)
	})
	cctx, cancel := context.WithCancel(context.WithValue(ctx, gitTransferKey{}, xfer))
	defer cancel()
	xfer.cancel = cancel
	repo, err := git.CloneContext(cctx, st, nil, opts)
	if err != nil {
		return nil, xfer.classify(err, s["url"])
	}
	head, err := repo.Head()
	if err != nil {
		return nil, fail(Unreachable, err, "repository %s has no head", redact(s["url"]))
	}
	commit, err := repo.CommitObject(head.Hash())
	if err != nil {
		return nil, fail(BadContent, err, "read head commit")
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fail(BadContent, err, "read head tree")
	}
	cursor, _ := json.Marshal(gitCursor{Commit: head.Hash().String()})
	g := gitRun{tree: tree, prefix: s["path"], lim: req.Env.Limits, cs: &ChangeSet{Cursor: cursor}}

	var last gitCursor
	var prev *object.Tree
	if len(req.Cursor) > 0 && json.Unmarshal(req.Cursor, &last) == nil && last.Commit != "" {
		if c, err := repo.CommitObject(plumbing.NewHash(last.Commit)); err == nil {
			prev, _ = c.Tree()
		}
	}
	if prev == nil {
		// First run, or history rewritten past the last commit: list all,
		// and the runner deletes what the listing lacks.
		return g.cs, g.listAll(ctx)
	}
	changes, err := object.DiffTreeWithOptions(ctx, prev, tree, &object.DiffTreeOptions{DetectRenames: true})
	if err != nil {
		return nil, fail(BadContent, err, "diff %s..%s", last.Commit[:min(12, len(last.Commit))], head.Hash().String()[:12])
	}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return nil, fail(BadContent, err, "read a change")
		}
		from, to := ch.From.Name, ch.To.Name
		if from != "" && (action == merkletrie.Delete || from != to) {
			if id, ok := g.id(from); ok {
				g.cs.Deletes = append(g.cs.Deletes, id)
			}
		}
		if to != "" {
			if err := g.take(to); err != nil {
				return nil, err
			}
		}
	}
	return g.cs, g.retry(ctx, last.Retry)
}

// retry takes the files of ids (what the last run skipped or the service
// refused) that the diff did not already take or delete; one no longer in
// the head tree is gone, and the diff said so.
func (g *gitRun) retry(ctx context.Context, ids []string) error {
	done := map[string]bool{}
	for _, f := range g.cs.Upserts {
		done[f.ID] = true
	}
	for _, sk := range g.cs.Skipped {
		done[sk.ID] = true
	}
	for _, id := range g.cs.Deletes {
		done[id] = true
	}
	for _, id := range ids {
		if done[id] || ctx.Err() != nil {
			continue
		}
		done[id] = true
		p := id
		if g.prefix != "" {
			p = g.prefix + "/" + id
		}
		if err := g.take(p); err != nil {
			return err
		}
	}
	return ctx.Err()
}

type gitRun struct {
	tree   *object.Tree
	prefix string
	lim    Limits
	cs     *ChangeSet
	total  int64
	files  int
}

// id maps a repository path to the source's id: its path below prefix;
// false when outside it or not a document format.
func (g *gitRun) id(p string) (string, bool) {
	if g.prefix != "" {
		rest, ok := strings.CutPrefix(p, g.prefix+"/")
		if !ok {
			return "", false
		}
		p = rest
	}
	f, ok := docformat.ForPath(p)
	return p, ok && !f.Container()
}

// listAll takes every file of the head tree. The walk does not stop at a
// name go-git would not check out (a control character, a .git-shaped
// element): take reports that file alone, so the others are still synced.
func (g *gitRun) listAll(ctx context.Context) error {
	g.cs.Full = true
	w := object.NewTreeWalker(g.tree, true, nil)
	w.SkipPathValidation()
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fail(BadContent, err, "list files")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !e.Mode.IsFile() {
			continue // a folder (walked into), a submodule
		}
		if err := g.take(name); err != nil {
			return err
		}
	}
}

// take reads one file of the head tree into the change set.
func (g *gitRun) take(p string) error {
	id, ok := g.id(p)
	if !ok {
		return nil
	}
	// What ingestion refuses as an id (platform/docid), reported by name
	// here, where go-git would not even read it (FindEntry refuses it).
	if err := docid.Check(id); err != nil {
		g.cs.Skipped = append(g.cs.Skipped, Skip{ID: id, Reason: "external_id " + err.Error()})
		return nil
	}
	if _, err := g.tree.FindEntry(p); err != nil && !errors.Is(err, object.ErrEntryNotFound) && !errors.Is(err, object.ErrDirectoryNotFound) {
		// A path go-git refuses to hand out (a .git-shaped element).
		g.cs.Skipped = append(g.cs.Skipped, Skip{ID: id, Reason: err.Error()})
		return nil
	}
	f, err := g.tree.File(p)
	if err != nil {
		return nil // a submodule or symlink target, not a blob
	}
	if !f.Mode.IsFile() {
		return nil
	}
	g.files++
	if g.lim.MaxFiles > 0 && g.files > g.lim.MaxFiles {
		return fail(TooLarge, nil, "more than %d files (BMCIS_SEARCH_SOURCES_MAX_FILES)", g.lim.MaxFiles)
	}
	if g.lim.MaxFileBytes > 0 && f.Size > g.lim.MaxFileBytes {
		g.cs.Skipped = append(g.cs.Skipped, Skip{ID: id, Reason: fmt.Sprintf("too large: %d bytes (limit %d)", f.Size, g.lim.MaxFileBytes)})
		return nil
	}
	g.total += f.Size
	if g.lim.MaxTotalBytes > 0 && g.total > g.lim.MaxTotalBytes {
		return fail(TooLarge, nil, "the changed files exceed %d bytes (BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES)", g.lim.MaxTotalBytes)
	}
	r, err := f.Reader()
	if err != nil {
		return fail(BadContent, err, "read %s", p)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return fail(BadContent, err, "read %s", p)
	}
	g.cs.Upserts = append(g.cs.Upserts, File{ID: id, Content: b, Category: firstFolder(id)})
	return nil
}

// gitError classifies a clone's failure; the message names the URL
// without user info or query.
func gitError(err error, raw string) error {
	u := redact(raw)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fail(AuthFailed, nil, "repository %s refused the credentials (check token_ref)", u)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fail(Unreachable, nil, "repository %s not found (or the token may not read it)", u)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fail(Unreachable, nil, "repository %s is empty", u)
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return fail(BadSettings, nil, "repository %s has no such branch", u)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fail(Unreachable, err, "repository %s: clone did not finish", u)
	}
	return fail(Unreachable, errors.New(scrub(err.Error(), raw, u)), "clone %s", u)
}

// redact returns raw without user info, query or fragment.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// scrub replaces the raw URL in a library's message by its redacted form.
func scrub(msg, raw, redacted string) string {
	if raw == "" {
		return msg
	}
	return strings.ReplaceAll(msg, raw, redacted)
}

const (
	// gitLargeObject: a blob bigger than this is not read into memory
	// when its object is loaded, only when its content is taken.
	gitLargeObject = 1 << 20
	// gitObjectCache bounds the decoded objects kept in memory per run.
	gitObjectCache = 16 << 20
)

// installGitHTTP puts gitRoundTripper under go-git's http and https
// transports, once: go-git v5 takes an HTTP client only process-wide, so
// each run's rules travel in the request context (gitTransferKey).
var installGitHTTP sync.Once

type gitTransferKey struct{}

// gitTransfer is one run's fetch: its address rule (webClient's dialer,
// the one web sources use) and the bytes it may receive.
type gitTransfer struct {
	rt      http.RoundTripper
	limit   int64 // 0: unbounded
	read    atomic.Int64
	over    atomic.Bool
	refused atomic.Pointer[dialRefused]
	cancel  context.CancelFunc // ends the clone once over the limit
}

func newGitTransfer(env Env) *gitTransfer {
	return &gitTransfer{rt: webClient(env).Transport, limit: env.Limits.MaxTotalBytes}
}

// close drops the run's idle connections (each run has its own transport).
func (x *gitTransfer) close() {
	if c, ok := x.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// errGitTooLarge ends a fetch past the run's byte limit; classify reports
// it from the transfer's own record, whatever go-git wrapped it in.
var errGitTooLarge = errors.New("the fetch passed the run's byte limit")

// count adds n received bytes; past the limit it ends the clone.
func (x *gitTransfer) count(n int) error {
	if x.read.Add(int64(n)) > x.limit && x.limit > 0 {
		x.over.Store(true)
		x.cancel()
		return errGitTooLarge
	}
	return nil
}

// classify turns a failed clone into the run's error: the transfer's own
// refusals first, then gitError.
func (x *gitTransfer) classify(err error, raw string) error {
	if x.over.Load() {
		return fail(TooLarge, nil, "repository %s: the fetch passed %d bytes (BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES)", redact(raw), x.limit)
	}
	if de := x.refused.Load(); de != nil {
		return fail(Unreachable, nil, "repository %s: %s", redact(raw), de.Error())
	}
	return gitError(err, raw)
}

// gitRoundTripper sends a request through its run's transport, counting
// the response body. A request outside a source run is refused: no git
// fetch of this process goes around the address rule.
type gitRoundTripper struct{}

func (gitRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(gitTransferKey{}).(*gitTransfer)
	if x == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("git over HTTP is only fetched within a source run")
	}
	resp, err := x.rt.RoundTrip(req)
	if err != nil {
		var de *dialRefused
		if errors.As(err, &de) {
			x.refused.Store(de)
		}
		return nil, err
	}
	resp.Body = &gitCountedBody{ReadCloser: resp.Body, xfer: x}
	return resp, nil
}

type gitCountedBody struct {
	io.ReadCloser
	xfer *gitTransfer
}

func (b *gitCountedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if cerr := b.xfer.count(n); cerr != nil {
		return n, cerr
	}
	return n, err
}

// gitStorage is the clone's on-disk storage; for file:// (no HTTP to
// count) the received pack counts toward the run's limit as it is written.
// Past the limit the rest is discarded, not refused: go-git would wait
// for the git-upload-pack process blocked on its full pipe, whereas its
// next read sees the cancelled context and kills the process.
type gitStorage struct {
	*filesystem.Storage
	xfer      *gitTransfer
	countPack bool
}

func (s *gitStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil || !s.countPack {
		return w, err
	}
	return &gitCountedWriter{WriteCloser: w, xfer: s.xfer}, nil
}

type gitCountedWriter struct {
	io.WriteCloser
	xfer *gitTransfer
}

func (w *gitCountedWriter) Write(p []byte) (int, error) {
	if w.xfer.over.Load() || w.xfer.count(len(p)) != nil {
		return len(p), nil
	}
	return w.WriteCloser.Write(p)
}
