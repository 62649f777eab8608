package config_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// secretKind says which placeholders a variable must refuse: a secret the
// binary holds or presents, the digest of one, or a connection URL whose
// password is one.
type secretKind int

const (
	kindSecret secretKind = iota
	kindDigest
	kindURL
	// kindKey is a caller's API key: no length rule (its issuer sets the
	// format), every placeholder refused.
	kindKey
)

// placeholders are what the docs, the examples and the manifests publish,
// per kind, and what a hurried operator types.
var placeholders = map[secretKind][]string{
	kindSecret: {
		"changeme", "CHANGE_ME-read-credential-at-least-32-characters", // deploy/k8s/secret.example.yaml
		"replace-me-0123456789abcdef0123456789abcdef", "example-token-0123456789abcdef0123456789",
		"dev-only-insecure-cursor-secret", // the dev overlay
		"0123456789abcdef",                // too short
	},
	kindDigest: {
		"CHANGE_ME-sha256-hex-of-BMCIS_READ_TOKEN",                         // the Secret template
		"4f0caddd3ae07e7b2cd69195e2323aaf1b7381de9886af408a507ff88f92be4a", // the dev overlay's read credential's
		"changeme",
	},
	kindURL: {"CHANGE_ME-search", "CHANGE_ME", "dev-only-insecure-password", "replace-me", "PASSWORD"},
	kindKey: {"bmcis_<keyid>_<secret>", "<contents of .data/demo-api-key>", "${user_config.api_key}", "changeme"},
}

// binaryCase is one binary in one mode: the environment it starts with
// (every secret a generated one, every listener on a free port, every
// server unreachable), its arguments, and the secrets it reads.
type binaryCase struct {
	name    string
	binary  string
	args    []string
	env     map[string]string
	secrets map[string]secretKind
	// devEnv overrides env with the dev overlay's published values, which
	// the development switch must let through.
	devEnv map[string]string
}

func generated(t *testing.T) string {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func digestOf(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }

// unreachable is a database or Redis URL nobody answers, with a generated
// password, or with password pw.
func unreachable(scheme, user, pw string) string {
	if scheme == "redis" {
		return scheme + "://" + user + ":" + pw + "@127.0.0.1:1/0"
	}
	return scheme + "://" + user + ":" + pw + "@127.0.0.1:1/bmcis?sslmode=disable"
}

func binaryCases(t *testing.T) []binaryCase {
	digests := map[string]string{}
	devDigests := map[string]string{}
	for _, v := range []string{"BMCIS_READ_TOKEN_SHA256", "BMCIS_ADAPTER_TOKEN_SHA256", "BMCIS_INGEST_TOKEN_SHA256", "BMCIS_ADMIN_TOKEN_SHA256", "BMCIS_VENDORGRAPH_TOKEN_SHA256"} {
		digests[v] = digestOf(generated(t))
		devDigests[v] = digestOf("dev-only-insecure-" + v)
	}
	service := func(name string, extra map[string]string, extraSecrets map[string]secretKind, dev map[string]string) binaryCase {
		c := binaryCase{name: name, binary: stacktest.Binary(t, name),
			env: map[string]string{
				"BMCIS_GRPC_ADDR": "127.0.0.1:0", "BMCIS_METRICS_ADDR": "127.0.0.1:0",
				"DATABASE_URL":             unreachable("postgres", "bmcis_"+name+"_login", generated(t)),
				"DATABASE_CONNECT_TIMEOUT": "200ms",
			},
			secrets: map[string]secretKind{"DATABASE_URL": kindURL},
			devEnv:  map[string]string{"DATABASE_URL": unreachable("postgres", "bmcis_"+name+"_login", "dev-only-insecure-"+name)},
		}
		for k, v := range digests {
			c.env[k], c.secrets[k], c.devEnv[k] = v, kindDigest, devDigests[k]
		}
		for k, v := range extra {
			c.env[k] = v
		}
		for k, v := range extraSecrets {
			c.secrets[k] = v
		}
		for k, v := range dev {
			c.devEnv[k] = v
		}
		return c
	}
	adapter := stacktest.Binary(t, "mcp-adapter")
	adapterEnv := func(extra map[string]string) map[string]string {
		env := map[string]string{"BMCIS_SEARCH_ADDR": "127.0.0.1:1", "BMCIS_VENDORGRAPH_ADDR": "127.0.0.1:1", "BMCIS_AUTH_ADDR": "127.0.0.1:1",
			"BMCIS_SERVICE_TOKEN": generated(t), "BMCIS_CURSOR_SECRET": generated(t), "BMCIS_API_KEY": "bmcis_k1_" + generated(t),
			"BMCIS_MCP_HTTP_ADDR": "127.0.0.1:0"}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	adapterDev := map[string]string{"BMCIS_SERVICE_TOKEN": "dev-only-insecure-adapter-credential", "BMCIS_CURSOR_SECRET": "dev-only-insecure-cursor-secret"}
	return []binaryCase{
		service(stacktest.Search, map[string]string{"BMCIS_EMBEDDER_API_KEY": generated(t)},
			map[string]secretKind{"BMCIS_EMBEDDER_API_KEY": kindSecret}, map[string]string{"BMCIS_EMBEDDER_API_KEY": "dev-only-insecure-embedder-key"}),
		service(stacktest.VendorGraph, map[string]string{"BMCIS_VENDORGRAPH_TOKEN": generated(t), "BMCIS_SEARCH_ADDR": "127.0.0.1:1"},
			map[string]secretKind{"BMCIS_VENDORGRAPH_TOKEN": kindSecret}, map[string]string{"BMCIS_VENDORGRAPH_TOKEN": "dev-only-insecure-vendorgraph-credential"}),
		service(stacktest.Auth, map[string]string{"REDIS_URL": unreachable("redis", "", generated(t))},
			map[string]secretKind{"REDIS_URL": kindURL}, map[string]string{"REDIS_URL": unreachable("redis", "", "dev-only-insecure-redis")}),
		{name: "mcp-adapter stdio", binary: adapter, env: adapterEnv(nil),
			secrets: map[string]secretKind{"BMCIS_SERVICE_TOKEN": kindSecret, "BMCIS_CURSOR_SECRET": kindSecret, "BMCIS_API_KEY": kindKey},
			devEnv:  adapterDev},
		{name: "mcp-adapter http", binary: adapter, env: adapterEnv(map[string]string{"BMCIS_MCP_TRANSPORT": "http"}),
			secrets: map[string]secretKind{"BMCIS_SERVICE_TOKEN": kindSecret, "BMCIS_CURSOR_SECRET": kindSecret},
			devEnv:  adapterDev},
		{name: "mcp-adapter bridge", binary: adapter,
			env:     map[string]string{"BMCIS_MCP_URL": "http://127.0.0.1:1/mcp", "BMCIS_API_KEY": "bmcis_k1_" + generated(t)},
			secrets: map[string]secretKind{"BMCIS_API_KEY": kindKey}, devEnv: map[string]string{}},
		{name: "gateway", binary: stacktest.Binary(t, "gateway"),
			env: map[string]string{"BMCIS_GATEWAY_ADDR": "127.0.0.1:0", "BMCIS_GATEWAY_METRICS_ADDR": "off", "BMCIS_MCP_HEALTH_URL": "off",
				"BMCIS_SEARCH_ADDR": "127.0.0.1:1", "BMCIS_VENDORGRAPH_ADDR": "127.0.0.1:1", "BMCIS_AUTH_ADDR": "127.0.0.1:1",
				"BMCIS_SEARCH_METRICS_URL": "off", "BMCIS_VENDORGRAPH_METRICS_URL": "off", "BMCIS_AUTH_METRICS_URL": "off",
				"BMCIS_SERVICE_TOKEN": generated(t)},
			secrets: map[string]secretKind{"BMCIS_SERVICE_TOKEN": kindSecret},
			devEnv:  map[string]string{"BMCIS_SERVICE_TOKEN": "dev-only-insecure-read-credential"}},
		{name: "bmcisctl migrate up (the migration Job)", binary: stacktest.Binary(t, "bmcisctl"), args: []string{"migrate", "up"},
			env: map[string]string{
				"DATABASE_URL":                   unreachable("postgres", "bmcis_migrate", generated(t)),
				"BMCIS_SEARCH_DATABASE_URL":      unreachable("postgres", "bmcis_search_login", generated(t)),
				"BMCIS_VENDORGRAPH_DATABASE_URL": unreachable("postgres", "bmcis_vendorgraph_login", generated(t)),
				"BMCIS_AUTH_DATABASE_URL":        unreachable("postgres", "bmcis_auth_login", generated(t)),
				"BMCIS_BACKUP_DATABASE_URL":      unreachable("postgres", "bmcis_backup_login", generated(t)),
			},
			secrets: map[string]secretKind{"DATABASE_URL": kindURL, "BMCIS_SEARCH_DATABASE_URL": kindURL,
				"BMCIS_VENDORGRAPH_DATABASE_URL": kindURL, "BMCIS_AUTH_DATABASE_URL": kindURL, "BMCIS_BACKUP_DATABASE_URL": kindURL},
			devEnv: map[string]string{
				"DATABASE_URL":              unreachable("postgres", "bmcis", "dev-only-insecure-password"),
				"BMCIS_SEARCH_DATABASE_URL": unreachable("postgres", "bmcis_search_login", "dev-only-insecure-search"),
			}},
	}
}

// runBinary starts the binary with exactly env (nothing inherited but
// PATH), stdin empty, and returns its exit code and stderr; one still
// running after wait got past its configuration and is stopped (code -1).
// A case that must be refused waits long (refusedWait): a refusal comes in
// milliseconds, and a loaded machine must not turn a slow start into -1.
func runBinary(t *testing.T, c binaryCase, env map[string]string, wait time.Duration) (int, string) {
	t.Helper()
	cmd := exec.Command(c.binary, c.args...)
	cmd.Dir = t.TempDir()
	// An empty data directory: bmcisctl reads no credentials file.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir, "BMCIS_DATA_DIR=" + cmd.Dir, "BMCIS_LOG_LEVEL=error"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stderr.String()
	case <-time.After(wait):
		require.NoError(t, cmd.Process.Kill())
		<-done
		return -1, stderr.String()
	}
}

// startedWait is how long a binary that should get past its configuration
// runs before it is stopped; refusedWait bounds one that should refuse.
const (
	startedWait = 5 * time.Second
	refusedWait = time.Minute
)

func with(env map[string]string, overrides map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(overrides))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range overrides {
		out[k] = v
	}
	return out
}

// asValue puts a placeholder where the variable's kind carries it: a URL
// keeps its user and host and takes the placeholder as its password.
func asValue(kind secretKind, base, placeholder string) string {
	if kind != kindURL {
		return placeholder
	}
	scheme, rest, _ := strings.Cut(base, "://")
	userinfo, host, _ := strings.Cut(rest, "@")
	user, _, _ := strings.Cut(userinfo, ":")
	return scheme + "://" + user + ":" + placeholder + "@" + host
}

// Every binary refuses to start on a published or weak value of every
// secret it reads, with exit code 2 and a message naming the variable and
// not the value; it starts on generated values, and on the dev overlay's
// published ones only with the development switch.
func TestEveryBinaryRefusesPlaceholderSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts every binary")
	}
	for _, c := range binaryCases(t) {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := runBinary(t, c, c.env, startedWait)
			require.NotEqual(t, 2, code, "generated secrets are accepted:\n%s", stderr)
			require.NotContains(t, stderr, "invalid configuration")

			dev := with(c.env, c.devEnv)
			dev[config.EnvAllowInsecureSecrets] = "true"
			code, stderr = runBinary(t, c, dev, startedWait)
			require.NotEqual(t, 2, code, "the development switch accepts the dev overlay's values:\n%s", stderr)

			for name, kind := range c.secrets {
				for _, p := range placeholders[kind] {
					value := asValue(kind, c.env[name], p)
					code, stderr := runBinary(t, c, with(c.env, map[string]string{name: value}), refusedWait)
					require.Equal(t, 2, code, "%s=%q starts %s:\n%s", name, p, c.name, stderr)
					require.Contains(t, stderr, name+": ", "the message names the variable")
					require.NotContains(t, stderr, p, "the message never holds the value")
				}
			}
		})
	}
}
