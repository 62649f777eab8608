package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReaderValues(t *testing.T) {
	r := FromMap(map[string]string{
		"S": " text ", "I": "42", "F": "0.5", "B": "yes", "D": "250ms",
		"E": "Redis", "A": "127.0.0.1:8080", "L": "a, b,,c ",
	})
	require.Equal(t, "text", r.String("S", "def"))
	require.Equal(t, "def", r.String("MISSING", "def"))
	require.Equal(t, 42, r.Int("I", 1, 0, 100))
	require.InDelta(t, 0.5, r.Float("F", 0, 0, 1), 1e-9)
	require.True(t, r.Bool("B", false))
	require.Equal(t, 250*time.Millisecond, r.Duration("D", time.Second, 0, time.Minute))
	require.Equal(t, "redis", r.Enum("E", "memory", "memory", "redis"))
	require.Equal(t, "127.0.0.1:8080", r.Addr("A", ":1"))
	require.Equal(t, []string{"a", "b", "c"}, r.List("L", nil))
	require.NoError(t, r.Err())
}

func TestReaderCollectsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		read func(*Reader)
		want string
	}{
		{"missing required", nil, func(r *Reader) { r.Required("DATABASE_URL") }, "DATABASE_URL: required but not set"},
		{"not an integer", map[string]string{"N": "ten"}, func(r *Reader) { r.Int("N", 1, 0, 5) }, `N: must be an integer, got "ten"`},
		{"integer out of range", map[string]string{"N": "9"}, func(r *Reader) { r.Int("N", 1, 0, 5) }, "N: must be between 0 and 5, got 9"},
		{"bad float", map[string]string{"F": "x"}, func(r *Reader) { r.Float("F", 0, 0, 1) }, `F: must be a number`},
		{"bad bool", map[string]string{"B": "maybe"}, func(r *Reader) { r.Bool("B", false) }, `B: must be true or false`},
		{"bad duration", map[string]string{"D": "5"}, func(r *Reader) { r.Duration("D", 0, 0, time.Hour) }, `D: must be a duration`},
		{"bad enum", map[string]string{"E": "disk"}, func(r *Reader) { r.Enum("E", "a", "a", "b") }, `E: must be one of a, b`},
		{"bad addr", map[string]string{"A": "8080"}, func(r *Reader) { r.Addr("A", ":1") }, `A: must be host:port`},
		{"short secret", map[string]string{"T": "abc"}, func(r *Reader) { r.Secret("T", true, 16) }, "T: must be at least 32 characters long"},
		{"short secret in dev", map[string]string{"T": "abc", EnvAllowInsecureSecrets: "true"}, func(r *Reader) { r.Secret("T", true, 16) }, "T: must be at least 16 characters long"},
		{"placeholder", map[string]string{"T": "CHANGE_ME-service-token-at-least-16-chars-long"}, func(r *Reader) { r.Secret("T", true, 16) }, "T: is a published placeholder"},
		{"dev-only value", map[string]string{"T": "dev-only-insecure-service-token-0123456789"}, func(r *Reader) { r.Secret("T", true, 16) }, "T: is a published placeholder"},
		{"missing secret", nil, func(r *Reader) { r.Secret("T", true, 16) }, "T: required but not set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := FromMap(tc.env)
			tc.read(r)
			require.ErrorContains(t, r.Err(), tc.want)
		})
	}

	r := FromMap(map[string]string{"A": "x", "B": "y"})
	r.Int("A", 0, 0, 1)
	r.Bool("B", false)
	err := r.Err()
	require.ErrorContains(t, err, "A:")
	require.ErrorContains(t, err, "B:")
	// One problem a line, each indented under the heading, as a binary
	// prints them on exit 2.
	require.Equal(t, "invalid configuration:\n"+
		"  A: must be an integer, got \"x\"\n"+
		"  B: must be true or false, got \"y\"", err.Error())
}

func TestSecretNeverInMessages(t *testing.T) {
	r := FromMap(map[string]string{"TOKEN": "hunter2"})
	r.Secret("TOKEN", true, 16)
	require.Error(t, r.Err())
	require.NotContains(t, r.Err().Error(), "hunter2")
}

func TestSecretFailsClosed(t *testing.T) {
	strong := "3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f" // 32 random-looking hex characters
	r := FromMap(map[string]string{"T": strong})
	require.Equal(t, strong, r.Secret("T", true, 16))
	require.NoError(t, r.Err())

	// The development flag lets placeholders through, and nothing else does.
	r = FromMap(map[string]string{"T": "dev-only-token-0123456789", EnvAllowInsecureSecrets: "true"})
	r.Secret("T", true, 16)
	require.NoError(t, r.Err())
	for _, v := range []string{"false", "0", "yes-please"} {
		r = FromMap(map[string]string{"T": "dev-only-token-0123456789", EnvAllowInsecureSecrets: v})
		r.Secret("T", true, 16)
		require.Error(t, r.Err(), v)
	}
}

// devOverlayLiterals are the Secret literals the dev overlay publishes.
func devOverlayLiterals(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "k8s", "overlays", "dev", "kustomization.yaml"))
	require.NoError(t, err)
	_, secret, ok := strings.Cut(string(b), "\nsecretGenerator:")
	require.True(t, ok, "the dev overlay generates its Secret")
	secret, _, _ = strings.Cut(secret, "\n\n")
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- ([A-Z0-9_]+)=(\S+)$`).FindAllStringSubmatch(secret, -1) {
		out[m[1]] = m[2]
	}
	require.Contains(t, out, "BMCIS_READ_TOKEN_SHA256", "the dev overlay's literals were read")
	return out
}

// secretTemplateValues are the caller credentials and digests the Secret
// template publishes.
func secretTemplateValues(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "k8s", "secret.example.yaml"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(BMCIS_[A-Z_]*TOKEN(?:_SHA256)?): (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	require.Contains(t, out, "BMCIS_READ_TOKEN", "the template's values were read")
	return out
}

// Every credential and credential digest the repository publishes is refused
// outside development, with a message naming the variable and not the value.
func TestPublishedCredentialsRefused(t *testing.T) {
	digest := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	digests := map[string]string{ // variable -> published digest
		"STACKTEST_READ_UPPER": strings.ToUpper(digest("stacktest-read-credential-0123456789abcdef")),
	}
	secrets := map[string]string{}
	urlPasswords := map[string]string{} // variable -> the password inside its URL
	for k, v := range secretTemplateValues(t) {
		if strings.HasSuffix(k, "_TOKEN") {
			digests["TEMPLATE_"+k+"_DIGEST"] = digest(v)
		}
		digests["TEMPLATE_"+k] = v // the template's digest placeholders
	}
	for k, v := range devOverlayLiterals(t) {
		switch {
		case strings.HasSuffix(k, "_SHA256"):
			digests[k] = v
		case strings.HasSuffix(k, "_TOKEN"): // a caller credential: the services hold its digest
			secrets[k] = v
			digests[k+"_DIGEST"] = digest(v)
		case strings.Contains(k, "SECRET"), strings.Contains(k, "PASSWORD"):
			secrets[k] = v
		case strings.HasSuffix(k, "_URL"):
			u, err := url.Parse(v)
			require.NoError(t, err, k)
			pw, ok := u.User.Password()
			require.True(t, ok, "%s carries a password", k)
			urlPasswords[k] = pw
		default:
			t.Fatalf("the dev overlay publishes %s, which this test does not check", k)
		}
	}
	require.Contains(t, urlPasswords, "DATABASE_URL")
	require.Contains(t, digests, "BMCIS_ADAPTER_TOKEN_SHA256")
	for _, dev := range []bool{false, true} {
		env := map[string]string{}
		for k, v := range digests {
			env[k] = v
		}
		for k, v := range secrets {
			env[k] = v
		}
		if dev {
			env[EnvAllowInsecureSecrets] = "true"
		}
		r := FromMap(env)
		for k := range digests {
			require.Equal(t, env[k], r.SecretDigest(k))
		}
		for k := range secrets {
			r.Secret(k, true, 16)
		}
		for k, pw := range urlPasswords {
			r.URLPassword(k, pw)
		}
		if dev {
			require.NoError(t, r.Err(), "the development flag accepts published values")
			continue
		}
		msg := r.Err().Error()
		for k := range digests {
			require.Contains(t, msg, k+": is ", "%s is refused", k)
		}
		for k := range secrets {
			require.Contains(t, msg, k+": is a published placeholder")
		}
		for k, pw := range urlPasswords {
			require.Contains(t, msg, k+": its password is a published placeholder")
			require.NotContains(t, msg, pw, "no password in the message")
		}
		for _, v := range env {
			require.NotContains(t, msg, v, "no value in the message")
		}
		require.Contains(t, msg, "BMCIS_READ_TOKEN_SHA256: is the digest of a published credential")
	}

	// A digest of a generated credential passes.
	r := FromMap(map[string]string{"D": digest("3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f")})
	r.SecretDigest("D")
	require.NoError(t, r.Err())
}

// A placeholder is refused whatever its case and separators, and so is a
// template never filled in; every kind of secret the reader checks refuses
// it, without repeating it.
func TestPlaceholderSpellingsRefused(t *testing.T) {
	placeholders := []string{
		"change-me-0123456789abcdef0123456789abcdef",  // CHANGE_ME with a dash
		"Change Me 0123456789abcdef0123456789abcdef",  // and with a space
		"replace-me-0123456789abcdef0123456789abcdef", // the usual other one
		"REPLACE_ME_0123456789abcdef0123456789abcdef",
		"PASSWORD", // docs/DEPLOY.md's example URL password
		"bmcis_<keyid>_<secret>",
		"<contents of .data/demo-api-key>",
		"${user_config.api_key}",
	}
	for _, v := range placeholders {
		t.Run(v, func(t *testing.T) {
			r := FromMap(map[string]string{"T": v, "D": v, "K": v})
			r.Secret("T", true, 16)
			r.SecretDigest("D")
			r.Credential("K")
			r.URLPassword("U", v)
			msg := r.Err().Error()
			require.Contains(t, msg, "T: is a published placeholder")
			require.Contains(t, msg, "D: is a published placeholder")
			require.Contains(t, msg, "K: is a published placeholder")
			require.Contains(t, msg, "U: its password is a published placeholder")
			require.NotContains(t, msg, v)
		})
	}
	// Generated values and real-looking passwords pass.
	for _, v := range []string{"3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f", "q7Zk-2b_Lw.9xP0r Vn3Hm4Tj6Yd8Fs1Ga", "x<9Kq2mZ+r7Lw0pT4vN8bH6cJ3dF5gY1s"} {
		r := FromMap(map[string]string{"T": v})
		r.Secret("T", true, 16)
		r.URLPassword("U", v)
		require.NoError(t, r.Err(), v)
	}
}
