// Package config reads settings from environment variables. Every problem is
// collected, so a binary that starts with bad configuration names each bad
// variable in one message instead of failing on the first. Secret values never
// appear in those messages.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reader reads typed values from an environment and remembers what was wrong.
type Reader struct {
	lookup func(string) (string, bool)
	errs   []error
}

// FromEnv reads the process environment.
func FromEnv() *Reader { return &Reader{lookup: os.LookupEnv} }

// FromLookup reads through lookup (an environment layered over a file, say).
func FromLookup(lookup func(string) (string, bool)) *Reader { return &Reader{lookup: lookup} }

// FromMap reads a fixed map; for tests.
func FromMap(m map[string]string) *Reader {
	return &Reader{lookup: func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}}
}

// ErrInvalid is what Err wraps: a caller can tell a refused configuration
// from its other errors (bmcisctl's exit code) without reading the text.
var ErrInvalid = errors.New("invalid configuration")

// Err returns every problem found so far, or nil.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return &invalidError{errs: slices.Clone(r.errs)}
}

// invalidError lists the problems one a line, each indented under the
// heading, so a binary's exit message reads as one list.
type invalidError struct{ errs []error }

func (e *invalidError) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, err := range e.errs {
		for line := range strings.SplitSeq(err.Error(), "\n") {
			b.WriteString("\n  " + line)
		}
	}
	return b.String()
}

// Unwrap gives ErrInvalid and each problem, for errors.Is and errors.As.
func (e *invalidError) Unwrap() []error { return append([]error{ErrInvalid}, e.errs...) }

// Failf records a problem with a variable; for checks that span variables.
func (r *Reader) Failf(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (r *Reader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// String returns the variable or def when unset.
func (r *Reader) String(name, def string) string {
	if v, ok := r.get(name); ok {
		return v
	}
	return def
}

// Required returns the variable and records a problem when it is unset.
func (r *Reader) Required(name string) string {
	v, ok := r.get(name)
	if !ok {
		r.Failf(name, "required but not set")
	}
	return v
}

// Secret returns a secret. When required it must be set; when set it must be
// at least minLen characters. Messages never include the value.
func (r *Reader) Secret(name string, required bool, minLen int) string {
	v, ok := r.get(name)
	switch {
	case !ok && required:
		r.Failf(name, "required but not set")
	case ok && r.insecureAllowed():
		if len(v) < minLen {
			r.Failf(name, "must be at least %d characters long", minLen)
		}
	case ok:
		if why := weakSecret(v, minLen); why != "" {
			r.Failf(name, "%s; generate one (openssl rand -hex 32), or set %s=true on a development machine", why, EnvAllowInsecureSecrets)
		}
	}
	return v
}

// EnvAllowInsecureSecrets lets a development machine start with short or
// placeholder secrets. Nothing else turns the checks off. It does not let a
// service connect as a database role wider than its own: that is
// pg.EnvAllowPrivilegedLogin's alone.
const EnvAllowInsecureSecrets = "BMCIS_ALLOW_INSECURE_SECRETS"

// MinSecretLen is the shortest secret a binary starts with outside
// development: 32 bytes of a random hex string carry 128 bits.
const MinSecretLen = 32

// placeholderMarks are the parts of every placeholder this project has
// published (examples, the dev overlay, docs, platform/stacktest), and of
// the usual ones (replace-me), written without separators: a secret
// containing one, in any case and with any separators ("CHANGE_ME",
// "change-me", "Change Me"), is known. "password" is docs/DEPLOY.md's
// example URL password; a generated secret never contains it.
var placeholderMarks = []string{"changeme", "replaceme", "devonly", "placeholder", "example", "insecure", "stacktest", "password"}

// templateMark matches a value a template was meant to fill in and did
// not: "<contents of .data/demo-api-key>", "bmcis_<keyid>_<secret>",
// "${user_config.api_key}".
var templateMark = regexp.MustCompile(`<[A-Za-z0-9 _./-]+>|\$\{[^}]*\}`)

// separators are dropped before the marks are looked for.
var separators = strings.NewReplacer("-", "", "_", "", ".", "", " ", "")

// publishedDigests are the lowercase hex SHA-256 digests of the caller
// credentials this repository publishes whole. Their marks refuse the
// credentials themselves; this list refuses their digests, which carry no
// mark (the services hold digests, not credentials). Digests only, so no
// binary carries a credential. Tests read the dev overlay, the Secret
// template and platform/stacktest to keep it complete.
var publishedDigests = map[string]bool{
	// deploy/k8s/overlays/dev: BMCIS_READ_TOKEN, BMCIS_ADAPTER_TOKEN, BMCIS_VENDORGRAPH_TOKEN
	"4f0caddd3ae07e7b2cd69195e2323aaf1b7381de9886af408a507ff88f92be4a": true,
	"8c2677b421b1de1e43880e46939433204685ad420b392ba932dd2e2d1d8d4393": true,
	"98892552aba3af5b8dc46faf399a8752e17ad8cadbd93edcd3bb995131d7756d": true,
	// deploy/k8s/secret.example.yaml: BMCIS_READ_TOKEN, BMCIS_ADAPTER_TOKEN, BMCIS_VENDORGRAPH_TOKEN
	"bef20c7573c6bc79702cc65d2ab60d7f9b5ff27a017e98cead683c80c3ec6171": true,
	"458e15763eeb762d132e21542559ca9d215e91b9e1bc7ca6ad20c01076ca7839": true,
	"3172818c24ff804d30d1bad34994ba5482753d9ebafe0b646b5055f781861603": true,
	// platform/stacktest: ServiceToken, AdapterToken, IngestToken, AdminToken, VendorGraphToken
	"70148020fca22b0eb66e0a7f8ba64987c507b387023e1e3cb4d7cd0de1f78059": true,
	"8530635cb9d2d20928bf18a3f003325f59096d48dd176d271f68fe93d501b90f": true,
	"8d752a1a2b1c3bca3208114218d5848a0495744af13f759b3efc983293cc3cd3": true,
	"4e281177b9e45c4a3a44966e891d5475132600b111306bb89df7026677604cf0": true,
	"f3db9044b5c23fa1e6ef3456b52c1ddf9ef0c6079bf03827022a9090f00fe678": true,
}

// knownSecret says why v is public knowledge (a placeholder, a published
// credential or the digest of one), or "".
func knownSecret(v string) string {
	lower := strings.ToLower(v)
	if publishedDigests[lower] {
		return "is the digest of a published credential"
	}
	bare := separators.Replace(lower)
	for _, m := range placeholderMarks {
		if strings.Contains(bare, m) {
			return "is a published placeholder"
		}
	}
	if templateMark.MatchString(v) {
		return "is a published placeholder"
	}
	return ""
}

// weakSecret says why v must not be used as a secret, or "".
func weakSecret(v string, minLen int) string {
	if why := knownSecret(v); why != "" {
		return why
	}
	if n := max(minLen, MinSecretLen); len(v) < n {
		return fmt.Sprintf("must be at least %d characters long", n)
	}
	return ""
}

// SecretDigest returns the variable holding the hex SHA-256 digest of a
// credential, or "" when unset. Outside development it refuses a placeholder
// or the digest of a credential this repository publishes, naming the
// variable, never the value. The digest's format is the caller's to check.
func (r *Reader) SecretDigest(name string) string {
	v, ok := r.get(name)
	if ok && !r.insecureAllowed() {
		if why := knownSecret(v); why != "" {
			r.Failf(name, "%s; use the digest of a generated credential (openssl rand -hex 32), or set %s=true on a development machine", why, EnvAllowInsecureSecrets)
		}
	}
	return v
}

// Credential returns a caller's credential the binary presents and did not
// make (a user's API key), or "" when unset. Outside development it refuses
// a placeholder, naming the variable, never the value; its length and
// format are its issuer's to check.
func (r *Reader) Credential(name string) string {
	v, ok := r.get(name)
	if ok && !r.insecureAllowed() {
		if why := knownSecret(v); why != "" {
			r.Failf(name, "%s; use the key you were given, or set %s=true on a development machine", why, EnvAllowInsecureSecrets)
		}
	}
	return v
}

// URLPassword refuses, outside development, a published placeholder used as
// the password inside a connection URL (DATABASE_URL, REDIS_URL): the
// variable is no secret as a whole, but its password is. The message names
// the variable, never the value. An empty password is the server's to judge.
func (r *Reader) URLPassword(name, password string) {
	if password == "" || r.insecureAllowed() {
		return
	}
	if why := knownSecret(password); why != "" {
		r.Failf(name, "its password %s; use a generated one (openssl rand -hex 32), or set %s=true on a development machine", why, EnvAllowInsecureSecrets)
	}
}

func (r *Reader) insecureAllowed() bool {
	v, _ := r.get(EnvAllowInsecureSecrets)
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// InsecureSecretsAllowed reports whether the development flag is set.
func (r *Reader) InsecureSecretsAllowed() bool { return r.insecureAllowed() }

// Int returns an integer in [lo, hi], or def when unset.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.Failf(name, "must be an integer, got %q", v)
		return def
	}
	if n < lo || n > hi {
		r.Failf(name, "must be between %d and %d, got %d", lo, hi, n)
		return def
	}
	return n
}

// Float returns a number in [lo, hi], or def when unset.
func (r *Reader) Float(name string, def, lo, hi float64) float64 {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		r.Failf(name, "must be a number, got %q", v)
		return def
	}
	if f < lo || f > hi {
		r.Failf(name, "must be between %g and %g, got %g", lo, hi, f)
		return def
	}
	return f
}

// Bool returns a boolean (true/false, 1/0, yes/no, on/off), or def when unset.
func (r *Reader) Bool(name string, def bool) bool {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	r.Failf(name, "must be true or false, got %q", v)
	return def
}

// Duration returns a Go duration ("500ms", "30s") in [lo, hi], or def when unset.
func (r *Reader) Duration(name string, def, lo, hi time.Duration) time.Duration {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.Failf(name, "must be a duration such as 500ms or 30s, got %q", v)
		return def
	}
	if d < lo || d > hi {
		r.Failf(name, "must be between %s and %s, got %s", lo, hi, d)
		return def
	}
	return d
}

// Enum returns one of allowed (compared case-insensitively), or def when unset.
func (r *Reader) Enum(name, def string, allowed ...string) string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	v = strings.ToLower(v)
	if !slices.Contains(allowed, v) {
		r.Failf(name, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
		return def
	}
	return v
}

// Addr returns a listen address "host:port" (host may be empty), or def when unset.
func (r *Reader) Addr(name, def string) string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		r.Failf(name, "must be host:port, got %q", v)
		return def
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		r.Failf(name, "port must be 0..65535, got %q", port)
		return def
	}
	return v
}

// List returns a comma-separated list with blanks dropped, or def when unset.
func (r *Reader) List(name string, def []string) []string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
