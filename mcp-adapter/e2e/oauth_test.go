package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// The adapter as an OAuth 2.1 resource server against a real, certified
// OpenID provider (panva/oidc-provider, node e2e/oidc/provider.mjs) on
// loopback: protected resource metadata, 401 challenges, tokens obtained
// by the client-credentials grant with a resource indicator, every tool
// called with one, a category-scoped token applied by the auth service,
// refusals of a wrong audience, an expired token and another issuer's
// token, a key rotation, and API keys beside it all.
func TestOAuthResourceServer(t *testing.T) {
	_, npm := nodeTools(t)
	s := demo(t)
	k := key(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	prov := startOIDC(t, ctx, npm)
	issuers, clientSecret, stdin, next := prov.issuers, prov.secret, prov.stdin, prov.next

	// An auth service that trusts the provider, and the adapter, which
	// fetches the provider's keys at most once per keyRefresh.
	const keyRefresh = time.Second
	authSvc := s.StartService(t, stacktest.Auth, map[string]string{"BMCIS_AUTH_OAUTH_ISSUERS": issuers.Issuer})
	ln := stacktest.Listen(t)
	resource := "http://" + ln.Addr().String() + "/mcp"
	base := adapterHTTPOn(t, s, ln, map[string]string{
		"BMCIS_AUTH_ADDR":               authSvc.Addr(),
		"BMCIS_OAUTH_ISSUER":            issuers.Issuer,
		"BMCIS_OAUTH_RESOURCE":          resource,
		"BMCIS_OAUTH_SCOPES":            "kb:read,kb:read:security",
		"BMCIS_OAUTH_JWKS_MIN_INTERVAL": keyRefresh.String(),
		"BMCIS_LOG_LEVEL":               "info", // every call logged, for the check at the end
	})
	metadataURL := base + "/.well-known/oauth-protected-resource/mcp"

	var tokens []string // every token issued, for the log check
	token := func(issuer, client, scope, res string) string {
		t.Helper()
		tok := prov.token(t, ctx, issuer, client, scope, res)
		tokens = append(tokens, tok)
		return tok
	}
	// postFull sends an MCP initialize with headers and returns the status
	// and the response headers.
	postFull := func(headers map[string]string) (int, http.Header) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"oauth-e2e","version":"1"}}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		hc := &http.Client{Timeout: 20 * time.Second}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header
	}
	// post returns the status and the WWW-Authenticate challenge.
	post := func(headers map[string]string) (int, string) {
		t.Helper()
		code, h := postFull(headers)
		return code, h.Get("WWW-Authenticate")
	}
	// jwksFetches asks the provider how often main's key set was fetched.
	jwksFetches := func() int {
		t.Helper()
		_, err := io.WriteString(stdin, "jwks\n")
		require.NoError(t, err)
		var n int
		_, err = fmt.Sscanf(next(), "jwks %d", &n)
		require.NoError(t, err)
		return n
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	t.Run("protected resource metadata", func(t *testing.T) {
		for _, u := range []string{metadataURL, base + "/.well-known/oauth-protected-resource"} {
			resp, err := http.Get(u)
			require.NoError(t, err)
			var meta map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&meta))
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, resource, meta["resource"])
			require.Equal(t, []any{issuers.Issuer}, meta["authorization_servers"])
			require.Equal(t, []any{"kb:read", "kb:read:security"}, meta["scopes_supported"])
			require.Equal(t, []any{"header"}, meta["bearer_methods_supported"])
		}
	})

	t.Run("no credential: 401 naming the metadata", func(t *testing.T) {
		code, challenge := post(nil)
		require.Equal(t, http.StatusUnauthorized, code)
		require.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="kb:read kb:read:security"`, challenge)
	})

	t.Run("every tool with an access token", func(t *testing.T) {
		c := httpClient(t, base, bearer(token(issuers.Issuer, "kb-reader", "kb:read", resource)))
		env := callTool(t, c, "semantic_search", map[string]any{"query": "incident response", "response_mode": "metadata", "page_size": 5})
		require.Equal(t, "success", status(env), "%v", env["error"])
		results := env["results"].([]any)
		require.Len(t, results, 5)
		var ids []any
		for _, r := range results {
			ids = append(ids, r.(map[string]any)["chunk_id"])
		}
		env = callTool(t, c, "get_chunks", map[string]any{"chunk_ids": ids[:2]})
		require.Equal(t, "success", status(env), "%v", env["error"])
		require.Len(t, env["results"].([]any), 2)
		env = callTool(t, c, "find_vendor_info", map[string]any{"vendor_name": "Globex"})
		require.Equal(t, "success", status(env), "%v", env["error"])
		require.Equal(t, "Globex Corporation", env["results"].([]any)[0].(map[string]any)["vendor_name"])

		// The audit trail names the token's subject and issuer, never the
		// token (docs/AUDIT.md).
		conn, err := grpcclient.Dial(authSvc.Addr(), stacktest.AdminToken)
		require.NoError(t, err)
		defer conn.Close()
		var oauthEvent *authv1.AuditEvent
		require.Eventually(t, func() bool {
			resp, err := authv1.NewAuthServiceClient(conn).ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Tool: "find_vendor_info"})
			require.NoError(t, err)
			for _, e := range resp.GetEvents() {
				if e.GetPrincipalKind() == "oauth" {
					oauthEvent = e
					return true
				}
			}
			return false
		}, 20*time.Second, 50*time.Millisecond)
		require.Equal(t, issuers.Issuer, oauthEvent.GetOauthIssuer())
		require.NotEmpty(t, oauthEvent.GetPrincipal())
		require.Equal(t, "Globex", oauthEvent.GetQuery())
		require.Equal(t, "e2e-http", oauthEvent.GetClientName())
	})

	t.Run("a category-scoped token reads only its category", func(t *testing.T) {
		categories := func(tok string) map[string]bool {
			env := callTool(t, httpClient(t, base, bearer(tok)), "semantic_search", map[string]any{"query": "cloud provider data platform security", "response_mode": "metadata", "page_size": 10})
			require.Equal(t, "success", status(env), "%v", env["error"])
			out := map[string]bool{}
			for _, r := range env["results"].([]any) {
				out[r.(map[string]any)["source_category"].(string)] = true
			}
			return out
		}
		all := categories(token(issuers.Issuer, "kb-reader", "kb:read", resource))
		require.Greater(t, len(all), 1, "kb:read reads several categories: %v", all)
		require.Equal(t, map[string]bool{"security": true}, categories(token(issuers.Issuer, "kb-security", "kb:read:security", resource)))
	})

	t.Run("tools/list shows a token what its scope lets it call", func(t *testing.T) {
		// OAuth scopes narrow categories, never tools (platform/oauthscope):
		// a category-scoped token lists every tool, and every template.
		for client, scope := range map[string]string{"kb-reader": "kb:read", "kb-security": "kb:read:security"} {
			names, templates := listed(t, httpClient(t, base, bearer(token(issuers.Issuer, client, scope, resource))))
			require.Equal(t, allTools, names, scope)
			require.Len(t, templates, 2, scope)
		}
	})

	t.Run("refused tokens", func(t *testing.T) {
		wrongAudience := token(issuers.Issuer, "kb-reader", "kb:read", "http://127.0.0.1:1/elsewhere")
		otherIssuer := token(issuers.Other, "kb-reader", "kb:read", resource)
		short := token(issuers.Issuer, "kb-short", "kb:read", resource)
		untyped := token(issuers.Issuer, "kb-untyped", "kb:read", resource)
		// Forgeries of a valid token (its header's typ and kid kept): no
		// algorithm, a shared-secret algorithm keyed with what the issuer
		// publishes (RFC 8725 section 2.1), and claims changed under the
		// provider's own signature.
		valid := token(issuers.Issuer, "kb-reader", "kb:read", resource)
		jwks := getBody(t, ctx, issuers.Issuer+"/jwks")
		tokens = append(tokens, forged(t, valid, "HS256", jwks)) // alg none has no signature to look for
		require.Equal(t, "JWT", header(t, untyped)["typ"])
		require.Equal(t, "at+jwt", header(t, short)["typ"])
		require.LessOrEqual(t, claimInt(t, short, "exp")-claimInt(t, short, "iat"), int64(3), "kb-short tokens live three seconds")
		code, _ := post(bearer(short))
		require.Equal(t, http.StatusOK, code, "valid until it expires")
		time.Sleep(time.Until(time.Unix(claimInt(t, short, "exp"), 0)) + 1100*time.Millisecond)
		for _, tc := range []struct {
			name, token, description string
		}{
			{"wrong audience", wrongAudience, "the access token is not valid for this resource"},
			{"another issuer", otherIssuer, "the access token is not valid for this resource"},
			{"expired", short, "the access token has expired"},
			{"not a token", "a.b.c", "the access token is not valid for this resource"},
			{"not typed at+jwt (RFC 9068)", untyped, "the access token is not valid for this resource"},
			{"alg none, no signature", forged(t, valid, "none", nil), "the access token is not valid for this resource"},
			{"HS256 keyed with the issuer's public key set", forged(t, valid, "HS256", jwks), "the access token is not valid for this resource"},
			{"another subject under the provider's signature", resigned(t, valid, "sub", "someone-else"), "the access token is not valid for this resource"},
			{"a longer life under the provider's signature", resigned(t, valid, "exp", float64(time.Now().Add(24*time.Hour).Unix())), "the access token is not valid for this resource"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, challenge := post(bearer(tc.token))
				require.Equal(t, http.StatusUnauthorized, code)
				require.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="kb:read kb:read:security", error="invalid_token", error_description="`+tc.description+`"`, challenge)
			})
		}
	})

	t.Run("a valid token granting no scope of ours: 403 insufficient_scope", func(t *testing.T) {
		code, challenge := post(bearer(token(issuers.Issuer, "kb-other", "other:read", resource)))
		require.Equal(t, http.StatusForbidden, code)
		require.Equal(t, `Bearer error="insufficient_scope", scope="kb:read kb:read:security", resource_metadata="`+metadataURL+`", error_description="the access token grants no scope of this server"`, challenge)
	})

	// A request the OAuth check refuses is audited as a refused API key
	// is, from what the HTTP layer knows: the route (the body is never
	// read), no principal, the outcome answered, the client's address and
	// the request id of the refusal's log line. A request without any
	// credential (every OAuth client's discovery step) is not.
	t.Run("refused tokens are audited", func(t *testing.T) {
		conn, err := grpcclient.Dial(authSvc.Addr(), stacktest.AdminToken)
		require.NoError(t, err)
		defer conn.Close()
		refusals := func() []*authv1.AuditEvent {
			resp, err := authv1.NewAuthServiceClient(conn).ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Tool: "POST /mcp", PageSize: 1000})
			require.NoError(t, err)
			return resp.GetEvents()
		}
		since := time.Now()
		// The request without a credential goes first: the recorder sends
		// its entries in the order recorded, so once the two refusals after
		// it are in the trail, an entry for it would be too.
		for _, tc := range []struct {
			name    string
			headers map[string]string
			code    int
		}{
			{"no credential", nil, http.StatusUnauthorized},
			// Signed with a key the adapter holds: another issuer's token
			// would make it fetch keys, which it did too recently (503).
			{"wrong audience", bearer(token(issuers.Issuer, "kb-reader", "kb:read", "http://127.0.0.1:1/elsewhere")), http.StatusUnauthorized},
			{"no scope of ours", bearer(token(issuers.Issuer, "kb-other", "other:read", resource)), http.StatusForbidden},
		} {
			code, _ := post(tc.headers)
			require.Equal(t, tc.code, code, tc.name)
		}
		// Entries from the subtests above are older than since.
		var fresh []*authv1.AuditEvent
		require.Eventually(t, func() bool {
			fresh = fresh[:0]
			for _, e := range refusals() {
				if !e.GetTime().AsTime().Before(since) {
					fresh = append(fresh, e)
				}
			}
			return len(fresh) >= 2
		}, 20*time.Second, 50*time.Millisecond)
		logs := adapterLog(base)
		require.Len(t, fresh, 2, "two refused tokens, and nothing for the request without a credential")
		for _, e := range fresh {
			require.Equal(t, "AUTH_INVALID", e.GetOutcome())
			require.Equal(t, "/mcp", e.GetTarget())
			require.Empty(t, e.GetPrincipal())
			require.Empty(t, e.GetPrincipalKind())
			require.Empty(t, e.GetQuery())
			require.Empty(t, e.GetChunkIds())
			require.Equal(t, "127.0.0.1", e.GetClientAddress())
			require.Regexp(t, `^req_\d{15}$`, e.GetRequestId())
			require.Contains(t, logs, `"request_id":"`+e.GetRequestId()+`"`, "the entry's request id finds the refusal's log line")
		}
	})

	t.Run("the provider rotates its signing key", func(t *testing.T) {
		before := token(issuers.Issuer, "kb-reader", "kb:read", resource)
		_, err := io.WriteString(stdin, "rotate\n")
		require.NoError(t, err)
		rotated := next()
		require.True(t, strings.HasPrefix(rotated, "rotated "), rotated)
		after := token(issuers.Issuer, "kb-reader", "kb:read", resource)
		require.NotEqual(t, header(t, before)["kid"], header(t, after)["kid"], "signed with the new key")
		// The new key id makes the adapter fetch the keys again; if it
		// fetched them less than keyRefresh ago (for another issuer's
		// token above), it answers "retry shortly" until it may.
		require.Eventually(t, func() bool {
			code, h := postFull(bearer(after))
			require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code)
			if code == http.StatusServiceUnavailable {
				require.Equal(t, "5", h.Get("Retry-After"))
			}
			return code == http.StatusOK
		}, 3*keyRefresh+5*time.Second, 100*time.Millisecond)
		for _, tok := range []string{after, before} {
			env := callTool(t, httpClient(t, base, bearer(tok)), "semantic_search", map[string]any{"query": "backups", "page_size": 1})
			require.Equal(t, "success", status(env), "%v", env["error"])
		}
	})

	t.Run("unknown key ids do not make every request fetch the keys", func(t *testing.T) {
		valid := token(issuers.Issuer, "kb-reader", "kb:read", resource)
		time.Sleep(keyRefresh) // the rotation's fetch is behind us
		before := jwksFetches()
		require.Positive(t, before, "the provider counts its key set's fetches")
		const forged = 30
		start := time.Now()
		for i := range forged {
			// A real token's claims under a made-up key id (the signature
			// cannot match any key anyway).
			parts := strings.Split(valid, ".")
			h := header(t, valid)
			h["kid"] = fmt.Sprintf("made-up-%d", i)
			raw, err := json.Marshal(h)
			require.NoError(t, err)
			parts[0] = base64.RawURLEncoding.EncodeToString(raw)
			code, hdr := postFull(bearer(strings.Join(parts, ".")))
			switch code {
			case http.StatusUnauthorized: // checked against freshly fetched keys
				require.Contains(t, hdr.Get("WWW-Authenticate"), `error="invalid_token"`)
			case http.StatusServiceUnavailable: // keys fetched too recently to fetch again
				require.Equal(t, "5", hdr.Get("Retry-After"))
			default:
				t.Fatalf("a made-up key id answered %d", code)
			}
		}
		elapsed := time.Since(start)
		fetched := jwksFetches() - before
		require.GreaterOrEqual(t, fetched, 1, "the first unknown key id fetches the keys")
		require.LessOrEqual(t, fetched, 1+int(elapsed/keyRefresh), "%d made-up key ids in %s", forged, elapsed)
		// Known keys keep working meanwhile.
		code, _ := post(bearer(valid))
		require.Equal(t, http.StatusOK, code)
	})

	t.Run("a provider that does not type its tokens: the documented setting", func(t *testing.T) {
		ln := stacktest.Listen(t)
		resource := "http://" + ln.Addr().String() + "/mcp"
		lenient := adapterHTTPOn(t, s, ln, map[string]string{
			"BMCIS_AUTH_ADDR":                   authSvc.Addr(),
			"BMCIS_OAUTH_ISSUER":                issuers.Issuer,
			"BMCIS_OAUTH_RESOURCE":              resource,
			"BMCIS_OAUTH_ACCEPT_UNTYPED_TOKENS": "true",
		})
		for _, client := range []string{"kb-untyped", "kb-reader"} {
			env := callTool(t, httpClient(t, lenient, bearer(token(issuers.Issuer, client, "kb:read", resource))), "semantic_search", map[string]any{"query": "backups", "page_size": 1})
			require.Equal(t, "success", status(env), "%s: %v", client, env["error"])
		}
	})

	t.Run("API keys keep working beside it", func(t *testing.T) {
		for _, h := range []map[string]string{{"X-API-Key": k}, bearer(k)} {
			env := callTool(t, httpClient(t, base, h), "semantic_search", map[string]any{"query": "backups", "page_size": 1})
			require.Equal(t, "success", status(env), "%v", env["error"])
		}
		env := callTool(t, httpClient(t, base, map[string]string{"X-API-Key": "bmcis_nope_nope"}), "get_chunks", map[string]any{"chunk_ids": []any{1}})
		require.Equal(t, "AUTH_INVALID", code(env))
	})

	// Tokens and the client secret reach no log: the adapter logs why a
	// token was refused, never the token.
	logs := adapterLog(base) + authSvc.Logs()
	require.Contains(t, logs, "access token refused")
	for _, secret := range append(tokens, clientSecret) {
		require.NotContains(t, logs, secret)
		require.NotContains(t, logs, strings.Split(secret, ".")[len(strings.Split(secret, "."))-1], "a token's signature")
	}
}

// oidcProviderDir installs e2e/oidc (oidc-provider and the Node.js it
// needs, as locked) in place, once per lock: node_modules is git-ignored,
// and the Node.js download is the slow part.
func oidcProviderDir(t *testing.T, npm string) string {
	t.Helper()
	dir, err := filepath.Abs("oidc")
	require.NoError(t, err)
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	stamp := filepath.Join(dir, "node_modules", ".installed-lock")
	if done, err := os.ReadFile(stamp); err == nil && bytes.Equal(done, lock) {
		return dir
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir = dir
	out, err := install.CombinedOutput()
	require.NoError(t, err, "npm ci in e2e/oidc:\n%s", out)
	require.NoError(t, os.WriteFile(stamp, lock, 0o644))
	return dir
}

// header and claimInt read a JWT's parts without verifying them (the test
// looks at tokens it just obtained).
func header(t *testing.T, jwt string) map[string]any { return jwtPart(t, jwt, 0) }

func claimInt(t *testing.T, jwt, name string) int64 {
	return int64(jwtPart(t, jwt, 1)[name].(float64))
}

func jwtPart(t *testing.T, jwt string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// forged is tok with its header's alg set to alg and signed with key by
// HMAC-SHA256 (alg "none": no signature), claims unchanged.
func forged(t *testing.T, tok, alg string, key []byte) string {
	t.Helper()
	h := header(t, tok)
	h["alg"] = alg
	hb, err := json.Marshal(h)
	require.NoError(t, err)
	signing := base64.RawURLEncoding.EncodeToString(hb) + "." + strings.Split(tok, ".")[1]
	if alg == "none" {
		return signing + "."
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// resigned is tok with one claim changed and the original signature kept.
func resigned(t *testing.T, tok, claim string, value any) string {
	t.Helper()
	c := jwtPart(t, tok, 1)
	c[claim] = value
	cb, err := json.Marshal(c)
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(cb) + "." + parts[2]
}

// getBody is a GET's body, which must answer 200.
func getBody(t *testing.T, ctx context.Context, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return b
}
