package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/bmcis/knowledge/platform/docformat"
	"github.com/bmcis/knowledge/platform/weburl"
)

// gitKind mirrors the files of a git repository's branch (optionally one
// folder of it): settings url, branch, path, token_ref, username. The
// cursor is the last synced commit; a run diffs it against the branch's
// head, so only changed, renamed and deleted files move.
var gitKind = &Kind{Name: "git", Check: checkGit, Fetch: fetchGit, Root: func(s map[string]string) string { return s["url"] }}

type gitCursor struct {
	Commit string `json:"commit"`
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
		if err := checkSecretRef(ref); err != nil {
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
	s := req.Settings
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
	// The whole branch history is fetched into memory: documentation
	// repositories are small, and the last synced commit must be present
	// to diff against it.
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	if err != nil {
		return nil, gitError(err, s["url"])
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
	return g.cs, nil
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

func (g *gitRun) listAll(ctx context.Context) error {
	g.cs.Full = true
	iter := g.tree.Files()
	defer iter.Close()
	for {
		f, err := iter.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fail(BadContent, err, "list files")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := g.take(f.Name); err != nil {
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
