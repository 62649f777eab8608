// Package sources fetches the documents of scheduled sources: one kind per
// file (git, web, folder), each registered by a row of kinds below. A kind
// turns a source's settings and the cursor its last successful run left
// into a change set: files to write, ids to delete, the next cursor. The
// search service's runner (server/sources.go) stores the change set through
// the ingestion path and keeps the cursor only when the run succeeded.
package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Kind is one kind of source.
type Kind struct {
	// Name is what `bmcisctl sources add --kind` and AddSource take.
	Name string
	// Check validates settings (the kind's own keys) and returns them
	// normalized, as stored. It never resolves a secret reference.
	Check func(settings map[string]string, env Env) (map[string]string, error)
	// Fetch produces the changes since cursor (nil: first run).
	Fetch func(ctx context.Context, req Request) (*ChangeSet, error)
	// Root is what ListSources shows as where the source lives.
	Root func(settings map[string]string) string
	// Retry returns cursor (a run's new one) changed so that the next run
	// fetches ids again, unchanged or not: the files this run skipped or
	// the service refused. A refusal may not last (a limit raised, a
	// format the service learned, a conflict with another source gone),
	// and a cursor that remembered them would never offer them again.
	Retry func(cursor []byte, ids []string) []byte
}

// kinds is the registry: a new kind is a file of this package and a row here.
var kinds = []*Kind{folderKind, gitKind, webKind}

// ByName returns the registered kind called name.
func ByName(name string) (*Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return nil, false
}

// Names lists the registered kinds.
func Names() []string {
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

// Request is one run of a source.
type Request struct {
	Name     string
	Settings map[string]string
	Cursor   []byte // the kind's own JSON; nil on the first run
	Env      Env
}

// Env is what the deployment allows every source.
type Env struct {
	Limits Limits
	// AllowPrivate lets web sources reach private (RFC 1918, ULA),
	// shared (RFC 6598) and link-local addresses; AllowLoopback lets them reach loopback
	// (development and tests). Both off: only public addresses.
	AllowPrivate, AllowLoopback bool
	// FolderRoot is the only directory folder sources may read below
	// ("" refuses folder sources).
	FolderRoot string
	// Lookup reads an environment variable (os.LookupEnv when nil).
	Lookup func(string) (string, bool)
	// SecretsDir is the only directory file: token references may name a
	// file below (DefaultSecretsDir when "").
	SecretsDir string
}

// TokenEnvPrefix starts every variable an env: token reference may name,
// and DefaultSecretsDir is where file: references live by default: an
// allow-list, so a caller with the ingest credential can name only what an
// operator set aside for sources, never the service's own configuration or
// a file the process happens to be able to read. (The token goes to a host
// that caller chooses.)
const (
	TokenEnvPrefix    = "SOURCE_TOKEN_"
	DefaultSecretsDir = "/var/run/secrets/bmcis-sources"
)

func (e Env) secretsDir() string {
	if e.SecretsDir == "" {
		return DefaultSecretsDir
	}
	return path.Clean(e.SecretsDir)
}

// Limits bound one run.
type Limits struct {
	MaxFileBytes  int64         // a bigger file or page is skipped (counted failed)
	MaxTotalBytes int64         // the run's content; more ends it as too large
	MaxFiles      int           // files or pages listed
	MaxDepth      int           // web crawl depth from the start page
	RequestEvery  time.Duration // web: at most one request per host per this
	Timeout       time.Duration // one HTTP request
}

// DefaultLimits are the limits when no setting is given.
func DefaultLimits() Limits {
	return Limits{MaxFileBytes: 8 << 20, MaxTotalBytes: 512 << 20, MaxFiles: 10_000, MaxDepth: 5,
		RequestEvery: 200 * time.Millisecond, Timeout: 30 * time.Second}
}

// File is one document of a change set.
type File struct {
	ID      string // id within the source (a path, a URL)
	Content []byte
	Format  string // a format name of the format registry ("" : by ID's extension)
	// Category is the document's category: a path's first folder, as
	// bmcisctl sync gives it ("" at the root, and for web pages).
	Category  string
	UpdatedAt time.Time
}

// firstFolder is a slash-separated path's first folder ("" at the root).
func firstFolder(p string) string {
	if i := strings.IndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return ""
}

// ChangeSet is what one run found.
type ChangeSet struct {
	Upserts []File
	// Deletes are ids whose documents are gone.
	Deletes []string
	// Full: Upserts, Unchanged and Skipped list every document the source
	// has now; the source's other stored documents are gone.
	Full bool
	// Unchanged lists ids of a Full set not fetched again (not modified).
	Unchanged []string
	// Skipped are files left out (too large, unknown format), each with its
	// reason; their stored versions stay.
	Skipped []Skip
	Cursor  []byte
	// Note is shown with the run's result (e.g. a crawl cut at its limit).
	Note string
}

// Skip is a file a run did not take.
type Skip struct {
	ID, Reason string
}

// Code classifies a failed run.
type Code string

// The failure codes.
const (
	Unreachable Code = "unreachable"
	AuthFailed  Code = "auth"
	TooLarge    Code = "too_large"
	BadSettings Code = "bad_settings"
	BadContent  Code = "bad_content" // a malformed sitemap, a redirect loop
)

// Error is a failed run or refused settings. Its message never holds a
// secret: URLs are shown without user info or query.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

func fail(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns err's code ("" when err is not an *Error).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// onlyKeys refuses settings keys a kind does not know.
func onlyKeys(s map[string]string, known ...string) error {
	for k := range s {
		found := false
		for _, n := range known {
			found = found || k == n
		}
		if !found {
			return fail(BadSettings, nil, "unknown setting %q (this kind takes %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// Secret resolves a secret reference: "env:NAME" reads an environment
// variable, "file:/path" a file (a mounted Kubernetes Secret). The value is
// never stored or logged. A reference to the service's own configuration
// is refused here too, for sources stored before the allow-list.
func (e Env) Secret(ref string) (string, error) {
	if err := e.checkSecretRef(ref); err != nil {
		return "", err
	}
	kind, what, _ := strings.Cut(ref, ":")
	if kind == "env" {
		look := e.Lookup
		if look == nil {
			look = os.LookupEnv
		}
		v, found := look(what)
		if !found || v == "" {
			return "", fail(AuthFailed, nil, "secret reference %q: the variable is not set", ref)
		}
		return v, nil
	}
	b, err := os.ReadFile(path.Clean(what))
	if err != nil {
		return "", fail(AuthFailed, nil, "secret reference %q: cannot read the file", ref)
	}
	return strings.TrimSpace(string(b)), nil
}

// checkSecretRef validates a reference without resolving it: env:NAME with
// NAME starting TokenEnvPrefix, or file:/path below the secrets directory
// (after cleaning, so ".." cannot climb out).
func (e Env) checkSecretRef(ref string) error {
	kind, what, ok := strings.Cut(ref, ":")
	switch {
	case ok && kind == "env" && what != "":
		if !strings.HasPrefix(what, TokenEnvPrefix) || len(what) == len(TokenEnvPrefix) {
			return fail(BadSettings, nil, "token reference %q: variables for source tokens start with %s (e.g. %sHANDBOOK), so no other setting of the service can be named", ref, TokenEnvPrefix, TokenEnvPrefix)
		}
		return nil
	case ok && kind == "file" && strings.HasPrefix(what, "/"):
		dir := e.secretsDir()
		if clean := path.Clean(what); !strings.HasPrefix(clean, dir+"/") {
			return fail(BadSettings, nil, "token reference %q: token files live below %s (BMCIS_SEARCH_SOURCES_SECRETS_DIR), where the source tokens are mounted", ref, dir)
		}
		return nil
	}
	return fail(BadSettings, nil, "token reference %q: want env:%sNAME or file:/path (a token itself is never stored)", ref, TokenEnvPrefix)
}
