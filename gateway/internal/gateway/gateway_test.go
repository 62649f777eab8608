package gateway

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/schematest"
)

// Every route reaches its RPC with a valid credential.
func TestEveryRouteSucceeds(t *testing.T) {
	s := newStack(t, nil)
	admin := []string{rest.HeaderAdminToken, testAdminToken}
	ingest := []string{rest.HeaderAdminToken, testIngestToken}
	cases := []struct {
		method, path, body string
		headers            []string
		want               string // a fragment of the body
	}{
		{"POST", "/v1/search", `{"query":"cloud","mode":"RETRIEVAL_MODE_BM25","limit":5}`, key(keyGood), `"mode":"RETRIEVAL_MODE_BM25"`},
		{"GET", "/v1/chunks?chunk_ids=101&chunk_ids=7", "", key(keyGood), `"missingIds":["7"]`},
		{"GET", "/v1/chunks?chunkIds=101", "", key(keyGood), `"chunkId":"101"`},
		{"DELETE", "/v1/documents/doc-1", "", ingest, `"chunksDeleted":3`},
		{"GET", "/v1/documents?principal=group:hr", "", ingest, `"access":["group:hr"]`},
		{"GET", "/v1/documents/doc-1", "", ingest, `"externalId":"doc-1"`},
		{"GET", "/v1/categories", "", key(keyGood), `"documentCount":2`},
		{"GET", "/v1/index/status", "", key(keyGood), `"embedderProvider":"builtin"`},
		{"GET", "/v1/sources", "", key(keyGood), `"name":"handbook"`},
		{"POST", "/v1/sources/handbook/files?file=a.md", "# A\n\ntext", ingest, `"documentsWritten":1`},
		{"POST", "/v1/sources", `{"name":"wiki","kind":"web","settings":{"url":"https://wiki.example.com/sitemap.xml"},"every_seconds":3600}`, ingest, `"everySeconds":"3600"`},
		{"POST", "/v1/sources/wiki:sync", "", ingest, `"documentsWritten":3`},
		{"DELETE", "/v1/sources/wiki", "", ingest, `"documentsDeleted":4`},
		{"GET", "/v1/vendors/Acme%20Corp?max_entities=3", "", key(keyGood), `"vendorName":"Acme Corp"`},
		{"GET", "/v1/vendor-suggestions?text=acm&limit=3", "", key(keyGood), `"name":"Acme Corp"`},
		{"GET", "/v1/graph/status", "", key(keyGood), `"relationships":"2"`},
		{"POST", "/v1/keys", `{"name":"ci"}`, admin, `"apiKey":"bmcis_k1_secret"`},
		{"GET", "/v1/keys", "", admin, `"keyId":"k1"`},
		{"POST", "/v1/keys/k1:revoke", `{}`, admin, `"revokedAt"`},
		{"POST", "/v1/keys/k1:rotate", `{"overlap":"60s"}`, admin, `"previous":{"keyId":"k1"`},
		{"GET", "/v1/audit?principal=good", "", admin, `"chunkIds":["101"]`},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := s.do(c.method, c.path, c.body, c.headers...)
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			require.Contains(t, string(r.body), c.want)
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			require.NotEmpty(t, r.header.Get(rest.HeaderRequestID))
			// Answers hold the caller's data (chunks, keys, the audit
			// trail): no browser or shared cache may keep them.
			require.Equal(t, "no-store", r.header.Get("Cache-Control"))
			require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
		})
		path := c.path
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		for _, rt := range rest.Routes {
			re := "^" + regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(regexp.QuoteMeta(rt.Path), `[^/:]+`) + "$"
			if rt.Method == c.method && regexp.MustCompile(re).MatchString(path) {
				covered[rt.Key()] = true
			}
		}
	}
	for _, rt := range rest.Routes {
		assert.True(t, covered[rt.Key()], "no success case for %s %s", rt.Method, rt.Path)
	}
}

// Every gRPC code maps to its HTTP status and a {code, message, details} body.
func TestEveryGRPCCodeMapsToHTTP(t *testing.T) {
	s := newStack(t, nil)
	want := map[codes.Code]int{
		codes.Canceled: 499, codes.Unknown: 500, codes.InvalidArgument: 400, codes.DeadlineExceeded: 504,
		codes.NotFound: 404, codes.AlreadyExists: 409, codes.PermissionDenied: 403, codes.ResourceExhausted: 429,
		codes.FailedPrecondition: 400, codes.Aborted: 409, codes.OutOfRange: 400, codes.Unimplemented: 501,
		codes.Internal: 500, codes.Unavailable: 503, codes.DataLoss: 500, codes.Unauthenticated: 401,
	}
	for c := codes.Code(1); c <= 16; c++ {
		t.Run(c.String(), func(t *testing.T) {
			require.Equal(t, want[c], apierror.HTTPStatus(c))
			r := s.do("POST", "/v1/search", fmt.Sprintf(`{"query":"code:%d"}`, int(c)), key(keyGood)...)
			require.Equal(t, want[c], r.status, "body: %s", r.body)
			schematest.Validate(t, schematest.Error, r.body)
			e := r.errBody(t)
			wantCode := apierror.CodeName(c)
			if c == codes.Unknown { // platform/grpcserver answers unknown errors as INTERNAL
				wantCode = "INTERNAL"
			}
			require.Equal(t, wantCode, e.Code)
			require.NotEmpty(t, e.Message)
			switch c {
			case codes.ResourceExhausted, codes.Unavailable:
				require.Equal(t, "1", r.header.Get("Retry-After"))
			default:
				require.Empty(t, r.header.Get("Retry-After"), "only transient codes say when to retry")
			}
			if c == codes.Unauthenticated {
				require.NotEmpty(t, r.header.Get("WWW-Authenticate"))
			}
		})
	}
	// Internal details never reach the caller: the service already replaces
	// unknown errors, and the gateway says less about UNKNOWN.
	r := s.do("POST", "/v1/search", `{"query":"code:2"}`, key(keyGood)...)
	require.NotContains(t, string(r.body), "scripted")

	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/categories", nil)
	s.gw.edge.WriteError(w, req, status.Error(codes.Unknown, "<html>proxy page</html>"))
	require.Equal(t, 500, w.Code)
	require.Contains(t, w.Body.String(), `"code":"UNKNOWN"`)
	require.NotContains(t, w.Body.String(), "proxy page")
}

func TestRequestErrorsMapToBadRequest(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("POST", "/v1/search", `{"query":`, key(keyGood)...)
	require.Equal(t, 400, r.status)
	require.Equal(t, "INVALID_ARGUMENT", r.errBody(t).Code)

	r = s.do("POST", "/v1/search", `{"querry":"typo"}`, key(keyGood)...)
	require.Equal(t, 400, r.status, "unknown fields are refused: %s", r.body)

	// Anything but whitespace after the body's JSON value is refused, on
	// every JSON route (one decoder), where a lax decoder read only the first.
	for _, body := range []string{`{"query":"x"} trailing`, `{"query":"x"}{"query":"y"}`, `{"query":"x"} }`} {
		r = s.do("POST", "/v1/search", body, key(keyGood)...)
		require.Equal(t, 400, r.status, "%q: %s", body, r.body)
		require.Equal(t, "INVALID_ARGUMENT", r.errBody(t).Code)
		require.Contains(t, r.errBody(t).Message, "after the JSON value")
	}
	r = s.do("POST", "/v1/keys", `{"name":"x"} 1`, rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 400, r.status, "%s", r.body)
	r = s.do("POST", "/v1/search", "{\"query\":\"x\"} \r\n\t", key(keyGood)...)
	require.Equal(t, 200, r.status, "trailing whitespace is fine: %s", r.body)

	r = s.do("GET", "/v1/chunks?chunk_ids=abc", "", key(keyGood)...)
	require.Equal(t, 400, r.status)

	// A query parameter naming no field of the request is refused like an
	// unknown body field: ignored, ?principle= would list everyone's reads.
	for _, c := range []struct{ path, param string }{
		{"/v1/audit?principle=good", "principle"},
		{"/v1/chunks?chunk_ids=101&chunk_idz=7", "chunk_idz"},
		{"/v1/vendors/Acme%20Corp?max_entites=3", "max_entites"},
		{"/v1/vendors/Acme%20Corp?options.max_entities=3", "options.max_entities"},
		{"/v1/categories?x[y]=1", "x[y]"},
	} {
		headers := key(keyGood)
		if strings.HasPrefix(c.path, "/v1/audit") {
			headers = []string{rest.HeaderAdminToken, testAdminToken}
		}
		r = s.do("GET", c.path, "", headers...)
		require.Equal(t, 400, r.status, "%s: %s", c.path, r.body)
		require.Equal(t, "INVALID_ARGUMENT", r.errBody(t).Code)
		require.Contains(t, r.errBody(t).Message, `unknown query parameter "`+c.param+`"`)
	}
	// A time parameter that is not RFC 3339 (a duration, as bmcisctl audit
	// --since takes, or a bare date) is refused naming the parameter and the
	// form it takes, not with Go's reference layout.
	for _, since := range []string{"24h", "2026-11-28", "yesterday"} {
		r = s.do("GET", "/v1/audit?since="+since, "", rest.HeaderAdminToken, testAdminToken)
		require.Equal(t, 400, r.status, "%s: %s", since, r.body)
		require.Equal(t, "INVALID_ARGUMENT", r.errBody(t).Code)
		msg := r.errBody(t).Message
		require.Contains(t, msg, `query parameter "since": "`+since+`" is not an RFC 3339 time`)
		require.Contains(t, msg, "2026-11-01T00:00:00Z")
		require.NotContains(t, msg, "2006-01-02")
	}
	r = s.do("GET", "/v1/audit?since=2026-11-01T00:00:00Z", "", rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 200, r.status, "%s", r.body)
	// Either spelling of a field still passes.
	for _, path := range []string{"/v1/chunks?chunkIds=101", "/v1/vendors/Acme%20Corp?maxEntities=3&max_relationships=2"} {
		r = s.do("GET", path, "", key(keyGood)...)
		require.Equal(t, 200, r.status, "%s: %s", path, r.body)
	}

	r = s.do("GET", "/v1/nothing-here", "", key(keyGood)...)
	require.Equal(t, 404, r.status)
	require.Equal(t, "ROUTE_NOT_FOUND", r.errBody(t).Code)

	r = s.do("PUT", "/v1/search", `{}`, key(keyGood)...)
	require.Equal(t, 405, r.status)
	require.Equal(t, "METHOD_NOT_ALLOWED", r.errBody(t).Code)

	r = s.do("POST", "/api/health", `{}`)
	require.Equal(t, 405, r.status)
	require.Equal(t, "GET", r.header.Get("Allow"))
}

func TestVendorErrorsCarryTheirDetails(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("GET", "/v1/vendors/Unknown%20Co", "", key(keyGood)...)
	require.Equal(t, 404, r.status)
	e := r.errBody(t)
	require.Equal(t, "VENDOR_NOT_FOUND", e.Code)
	require.Contains(t, string(r.body), `"suggestions":["Acme Corp"]`)
	require.Contains(t, string(r.body), `"@type":"type.googleapis.com/bmcis.vendorgraph.v1.VendorNotFoundDetail"`)

	r = s.do("GET", "/v1/vendors/Acme", "", key(keyGood)...)
	require.Equal(t, 400, r.status)
	require.Equal(t, "VENDOR_AMBIGUOUS", r.errBody(t).Code)
	require.Contains(t, string(r.body), `"candidates":["Acme Corp","Acme Labs"]`)
}

func TestAPIKeyChecks(t *testing.T) {
	s := newStack(t, nil)
	cases := []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"no key", nil, 401, "AUTH_REQUIRED"},
		{"unknown key", key("bmcis_nope_nope"), 401, "AUTH_INVALID"},
		{"expired key", key(keyExpired), 403, "AUTH_EXPIRED"},
		{"revoked key", key(keyRevoked), 403, "AUTH_REVOKED"},
		{"rate limited", key(keyLimited), 429, "RATE_LIMIT"},
		{"limiter down, closed mode: retryable, not the key's quota", key(keyUncounted), 503, "LIMITER_UNAVAILABLE"},
		{"bearer unknown", []string{"Authorization", "Bearer bmcis_nope"}, 401, "AUTH_INVALID"},
		{"basic auth is no key", []string{"Authorization", "Basic Zm9vOmJhcg=="}, 401, "AUTH_REQUIRED"},
		{"admin token is no API key", []string{rest.HeaderAdminToken, testAdminToken}, 401, "AUTH_REQUIRED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.do("POST", "/v1/search", `{"query":"cloud"}`, c.headers...)
			require.Equal(t, c.status, r.status, "body: %s", r.body)
			schematest.Validate(t, schematest.Error, r.body)
			require.Equal(t, c.code, r.errBody(t).Code)
			if c.status == 401 {
				require.Equal(t, `Bearer realm="bmcis"`, r.header.Get("WWW-Authenticate"))
			}
			if c.status == 429 {
				require.Equal(t, "17", r.header.Get("Retry-After"))
				require.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
				require.Equal(t, "Rate limit exceeded", r.errBody(t).Message)
				require.Contains(t, string(r.body), `"reset_in_seconds":"17"`)
				require.Contains(t, string(r.body), `"remaining_hour":"450"`)
				require.Contains(t, string(r.body), `"retryDelay":"17s"`)
			}
		})
	}
	for _, h := range [][]string{key(keyGood), {"Authorization", "Bearer " + keyGood}, {"authorization", "bearer " + keyGood}} {
		r := s.do("POST", "/v1/search", `{"query":"cloud"}`, h...)
		require.Equal(t, 200, r.status, "body: %s", r.body)
		require.Equal(t, "100", r.header.Get("X-RateLimit-Limit"))
		require.Equal(t, "99", r.header.Get("X-RateLimit-Remaining"))
	}
	// The operation names the route for the auth service's metrics and logs.
	require.Equal(t, "rest.search.Search", s.auth.lastOperation(t))

	// Dashboard data routes need a key too; health and the catalogue do not.
	require.Equal(t, 401, s.do("GET", "/api/stats", "").status)
	require.Equal(t, 200, s.do("GET", "/api/stats", "", key(keyGood)...).status)
	// The configuration (internal addresses, metrics URLs) is the operators':
	// it takes the admin credential, checked by the auth service, as the key
	// and audit routes do; an API key or another operator credential is refused.
	for _, c := range []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"nothing", nil, 401, "ADMIN_TOKEN_REQUIRED"},
		{"an API key", key(keyGood), 401, "ADMIN_TOKEN_REQUIRED"},
		{"the ingest credential", []string{rest.HeaderAdminToken, testIngestToken}, 403, "ADMIN_TOKEN_INVALID"},
		{"a wrong token", []string{rest.HeaderAdminToken, "not-the-admin-credential-0123456789"}, 401, "ADMIN_TOKEN_INVALID"},
	} {
		r := s.do("GET", "/api/config", "", c.headers...)
		require.Equal(t, c.status, r.status, "%s: %s", c.name, r.body)
		require.Equal(t, c.code, r.errBody(t).Code, c.name)
		require.Contains(t, string(r.body), "admin credential", c.name)
		require.NotContains(t, string(r.body), "mcpServers", c.name)
	}
	require.Equal(t, 200, s.do("GET", "/api/config", "", rest.HeaderAdminToken, testAdminToken).status)
	for _, p := range []string{"/api/health", "/api/servers", "/api/tools", "/openapi.json", "/", "/assets/app.js", "/healthz"} {
		require.Equal(t, 200, s.do("GET", p, "").status, p)
	}
}

func (f *fakeAuth) lastOperation(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.calls)
	return f.lastOp
}

func TestAuthServiceDownFailsClosed(t *testing.T) {
	s := newStack(t, nil)
	s.auth.checkErr.set(errUnavailable())
	r := s.do("POST", "/v1/search", `{"query":"cloud"}`, key(keyGood)...)
	require.Equal(t, 503, r.status)
	require.Equal(t, "AUTH_UNAVAILABLE", r.errBody(t).Code)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Empty(t, s.search.last(), "the search service must not be called")

	s.fakes[backends.Auth].stop()
	r = s.do("POST", "/v1/search", `{"query":"cloud"}`, key(keyGood)...)
	require.Equal(t, 503, r.status)
	require.Equal(t, "AUTH_UNAVAILABLE", r.errBody(t).Code)
	require.NotContains(t, string(r.body), "127.0.0.1")
}

func TestAdminRoutes(t *testing.T) {
	s := newStack(t, nil)
	// No token: refused by the gateway.
	r := s.do("POST", "/v1/keys", `{"name":"x"}`, key(keyGood)...)
	require.Equal(t, 401, r.status)
	require.Equal(t, "ADMIN_TOKEN_REQUIRED", r.errBody(t).Code)
	// A wrong credential: refused by the auth service's edge.
	r = s.do("POST", "/v1/keys", `{"name":"x"}`, rest.HeaderAdminToken, "wrong-token")
	require.Equal(t, 401, r.status)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code, "the same code as document deletion")
	r = s.do("GET", "/v1/keys", "", rest.HeaderAdminToken, "wrong-token")
	require.Equal(t, 401, r.status)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code)
	// The gateway's own credential cannot stand in: an ingest credential is
	// valid but not an admin's.
	r = s.do("GET", "/v1/keys", "", rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, 403, r.status)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code)
	r = s.do("GET", "/v1/keys", "", rest.HeaderAdminToken, testServiceToken)
	require.Equal(t, 403, r.status, "the read credential is no admin's")
	// The right one replaces the gateway's own credential upstream.
	r = s.do("POST", "/v1/keys", `{"name":"x"}`, rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 200, r.status, "body: %s", r.body)
	md := s.auth.last()
	require.Equal(t, []string{testAdminToken}, md.Get("x-bmcis-service-token"))
	require.Empty(t, md.Get("authorization"))
	require.Empty(t, md.Get("x-admin-token"))
	// Errors of admin RPCs map like any other.
	r = s.do("POST", "/v1/keys/nope:revoke", `{}`, rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 404, r.status)

	// Document deletion takes the ingest credential; search's edge decides.
	s.search.reset()
	r = s.do("DELETE", "/v1/documents/doc-1", "", key(keyGood)...)
	require.Equal(t, 401, r.status)
	r = s.do("DELETE", "/v1/documents/doc-1", "", rest.HeaderAdminToken, "wrong-token")
	require.Equal(t, 401, r.status)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code)
	r = s.do("DELETE", "/v1/documents/doc-1", "", rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 403, r.status, "key administrators do not delete documents")
	require.Empty(t, s.search.last())
	r = s.do("DELETE", "/v1/documents/doc-1", "", rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, 200, r.status)
	require.Equal(t, []string{testIngestToken}, s.search.last().Get("x-bmcis-service-token"))

	// The token never appears in the logs.
	require.NotContains(t, s.logs.String(), testAdminToken)
	require.NotContains(t, s.logs.String(), testIngestToken)
	require.NotContains(t, s.logs.String(), "wrong-token")
}

// The services see the service token and the caller's request id, and none
// of the caller's credentials or other headers.
func TestMetadataReachingServices(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("POST", "/v1/search", `{"query":"cloud"}`, rest.HeaderAPIKey, keyGood, rest.HeaderRequestID, "req-from-client-1", "X-Custom", "v", "Cookie", "a=b")
	require.Equal(t, 200, r.status)
	require.Equal(t, "req-from-client-1", r.header.Get(rest.HeaderRequestID))
	md := s.search.last()
	require.Equal(t, []string{testServiceToken}, md.Get("x-bmcis-service-token"))
	require.Equal(t, []string{"req-from-client-1"}, md.Get("x-request-id"))
	for _, k := range []string{"authorization", "x-api-key", "x-admin-token", "x-custom", "cookie", "x-bmcis-admin-token"} {
		require.Empty(t, md.Get(k), k)
	}
	require.Equal(t, []string{"req-from-client-1"}, s.auth.last().Get("x-request-id"))

	// Bearer credentials are not forwarded either.
	r = s.do("GET", "/v1/categories", "", "Authorization", "Bearer "+keyGood)
	require.Equal(t, 200, r.status)
	require.Empty(t, s.search.last().Get("authorization"))

	// A bad request id is replaced by one of the gateway's.
	r = s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, keyGood, rest.HeaderRequestID, strings.Repeat("x", 200))
	id := r.header.Get(rest.HeaderRequestID)
	require.True(t, strings.HasPrefix(id, "req_"), id)
	require.Equal(t, []string{id}, s.search.last().Get("x-request-id"))
	// Errors carry it too, and the API key never reaches the log.
	r = s.do("GET", "/api/stats", "")
	require.NotEmpty(t, r.header.Get(rest.HeaderRequestID))
	require.NotContains(t, s.logs.String(), keyGood)
	require.Contains(t, s.logs.String(), `"key_id":"good"`)
}

func TestCORS(t *testing.T) {
	t.Run("no origins by default", func(t *testing.T) {
		s := newStack(t, nil)
		r := s.do("OPTIONS", "/v1/search", "", "Origin", "https://dash.example.com", "Access-Control-Request-Method", "POST")
		require.Equal(t, 403, r.status)
		require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "ORIGIN_NOT_ALLOWED", r.errBody(t).Code)
		r = s.do("GET", "/api/health", "", "Origin", "https://dash.example.com")
		require.Equal(t, 403, r.status, "a foreign page may not read the API")
		require.Equal(t, "ORIGIN_NOT_ALLOWED", r.errBody(t).Code)
		require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
		r = s.do("POST", "/v1/search", `{"query":"cloud"}`, "Origin", "https://evil.example.com", rest.HeaderAPIKey, keyGood)
		require.Equal(t, 403, r.status)
		require.Empty(t, s.auth.last(), "a refused origin costs no check")
		r = s.do("GET", "/api/health", "")
		require.Equal(t, 200, r.status, "no Origin: not a browser")
		r = s.do("GET", "/api/health", "", "Origin", "http://localhost:8080")
		require.Equal(t, 200, r.status, "the listener's own origin (the dashboard)")
		require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("allowed origins without CORS", func(t *testing.T) {
		s := newStack(t, map[string]string{"BMCIS_GATEWAY_ALLOWED_ORIGINS": "https://kb.example.com"})
		r := s.do("POST", "/v1/search", `{"query":"cloud"}`, "Origin", "https://kb.example.com", rest.HeaderAPIKey, keyGood)
		require.Equal(t, 200, r.status)
		require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
		r = s.do("OPTIONS", "/v1/search", "", "Origin", "https://kb.example.com", "Access-Control-Request-Method", "POST")
		require.Equal(t, "CORS_ORIGIN_NOT_ALLOWED", r.errBody(t).Code)
	})
	t.Run("allow-list", func(t *testing.T) {
		s := newStack(t, map[string]string{"BMCIS_GATEWAY_CORS_ORIGINS": "https://dash.example.com, http://localhost:3000"})
		r := s.do("OPTIONS", "/v1/search", "", "Origin", "https://dash.example.com", "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type, x-api-key")
		require.Equal(t, 204, r.status)
		require.Equal(t, "https://dash.example.com", r.header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, r.header.Get("Access-Control-Allow-Headers"), "X-API-Key")
		require.Contains(t, r.header.Get("Access-Control-Allow-Methods"), "POST")
		require.Empty(t, r.header.Get("Access-Control-Allow-Credentials"))
		require.Contains(t, r.header.Values("Vary"), "Origin")
		require.Empty(t, s.auth.last(), "a preflight needs no key and costs no check")

		r = s.do("POST", "/v1/search", `{"query":"cloud"}`, "Origin", "http://localhost:3000", rest.HeaderAPIKey, keyGood)
		require.Equal(t, 200, r.status)
		require.Equal(t, "http://localhost:3000", r.header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, r.header.Get("Access-Control-Expose-Headers"), "Retry-After")

		r = s.do("POST", "/v1/search", `{"query":"cloud"}`, "Origin", "https://evil.example.com", rest.HeaderAPIKey, keyGood)
		require.Equal(t, 403, r.status)
		require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
		r = s.do("OPTIONS", "/v1/search", "", "Origin", "https://evil.example.com", "Access-Control-Request-Method", "POST")
		require.Equal(t, 403, r.status)
	})
	t.Run("explicit wildcard", func(t *testing.T) {
		s := newStack(t, map[string]string{"BMCIS_GATEWAY_CORS_ORIGINS": "*"})
		r := s.do("GET", "/api/health", "", "Origin", "https://anything.example.com")
		require.Equal(t, "*", r.header.Get("Access-Control-Allow-Origin"))
	})
}

func TestLimitsAndTimeouts(t *testing.T) {
	s := newStack(t, map[string]string{"BMCIS_GATEWAY_MAX_BODY_BYTES": "2048", "BMCIS_GATEWAY_REQUEST_TIMEOUT": "300ms"})
	big := `{"query":"` + strings.Repeat("a", 4096) + `"}`
	r := s.do("POST", "/v1/search", big, key(keyGood)...)
	require.Equal(t, 413, r.status)
	require.Equal(t, "REQUEST_TOO_LARGE", r.errBody(t).Code)

	// Without a Content-Length (chunked), the limit still holds.
	req, err := http.NewRequest("POST", s.url+"/v1/search", &chunkedReader{s: big})
	require.NoError(t, err)
	req.Header.Set(rest.HeaderAPIKey, keyGood)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 413, resp.StatusCode)

	start := time.Now()
	r = s.do("POST", "/v1/search", `{"query":"slow"}`, key(keyGood)...)
	require.Equal(t, 504, r.status, "body: %s", r.body)
	require.Equal(t, "DEADLINE_EXCEEDED", r.errBody(t).Code)
	require.Less(t, time.Since(start), 3*time.Second)
}

// chunkedReader hides its length so the request goes out chunked.
type chunkedReader struct {
	s string
	i int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.i >= len(c.s) {
		return 0, ioEOF
	}
	n := copy(p, c.s[c.i:])
	c.i += n
	return n, nil
}

// A file bigger than one gRPC message reaches the service in parts, whole.
func TestUploadSendsBigFilesInParts(t *testing.T) {
	s := newStack(t, nil)
	body := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	r := s.do("POST", "/v1/sources/big/files?file=big.txt", body, rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	s.search.mu.Lock()
	defer s.search.mu.Unlock()
	require.Equal(t, body, string(s.search.uploaded["big.txt"]))
}

// The upload route, served by the gateway itself, answers as every admin
// route does: its row in the route table (IngestDocuments on search) gives
// the shared error handling its codes, denial count and service name.
func TestUploadAnswersAsAnAdminRoute(t *testing.T) {
	s := newStack(t, nil)
	invalid := s.gw.metrics.Denials.WithLabelValues("ADMIN_TOKEN_INVALID")
	before := testutil.ToFloat64(invalid)
	r := s.do("POST", "/v1/sources/docs/files?file=a.md", "# A", rest.HeaderAdminToken, "wrong-token")
	require.Equal(t, 401, r.status, "%s", r.body)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code, "the same code as the other admin routes")
	require.Equal(t, before+1, testutil.ToFloat64(invalid), "the denial is counted")
	r = s.do("POST", "/v1/sources/docs/files?file=a.md", "# A", rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 403, r.status, "%s", r.body)
	require.Equal(t, "ADMIN_TOKEN_INVALID", r.errBody(t).Code)

	s.fakes[backends.Search].stop()
	r = s.do("POST", "/v1/sources/docs/files?file=a.md", "# A", rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, 503, r.status, "%s", r.body)
	require.Equal(t, "search service unavailable", r.errBody(t).Message)
	require.NotContains(t, string(r.body), s.fakes[backends.Search].addr)
}

// A wrong credential is refused before an upload takes one of the two
// slots or reads its body: callers without the ingest credential, however
// slow their bodies, cannot keep an operator's upload out.
func TestUploadRefusesWrongCredentialsBeforeReading(t *testing.T) {
	s := newStack(t, nil)
	type result struct {
		status int
		code   string
		err    error
	}
	results := make(chan result, 2)
	for range 2 {
		// A body that never comes: declared 8 MiB, nothing sent.
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		req, err := http.NewRequest("POST", s.url+"/v1/sources/docs/files?file=a.md", pr)
		require.NoError(t, err)
		req.ContentLength = 8 << 20
		req.Header.Set(rest.HeaderAdminToken, "junk")
		go func() {
			resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			var e apierror.Body
			_ = json.NewDecoder(resp.Body).Decode(&e)
			results <- result{status: resp.StatusCode, code: e.Code}
		}()
	}
	var got []result
	require.Eventually(t, func() bool {
		select {
		case r := <-results:
			got = append(got, r)
		default:
		}
		return len(got) == 2 || s.gw.upload.InProgress() == 2
	}, 3*time.Second, 5*time.Millisecond)

	r := s.do("POST", "/v1/sources/docs/files?file=b.md", "# B", rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, http.StatusOK, r.status, "the operator's upload goes in: %s", r.body)
	for len(got) < 2 {
		got = append(got, <-results)
	}
	for _, g := range got {
		require.NoError(t, g.err)
		require.Equal(t, http.StatusUnauthorized, g.status)
		require.Equal(t, "ADMIN_TOKEN_INVALID", g.code)
	}
}

// An upload none of whose files went in is an error that lists the
// failures; one with some files in is a 200 summary that lists the rest.
func TestUploadOfNothingIngestableFails(t *testing.T) {
	s := newStack(t, nil)
	for _, c := range []struct{ name, file, body string }{
		{"unknown format", "x.exe", "MZ"},
		{"empty body", "empty.md", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.do("POST", "/v1/sources/docs/files?file="+c.file, c.body, rest.HeaderAdminToken, testIngestToken)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			e := r.errBody(t)
			require.Equal(t, "UPLOAD_REJECTED", e.Code)
			require.Contains(t, e.Message, c.file)
			var summary struct {
				Type            string `json:"@type"`
				DocumentsFailed int    `json:"documentsFailed"`
				Failures        []struct {
					SourceFile, Reason string
				} `json:"failures"`
			}
			require.Len(t, e.Details, 2, "ErrorInfo and the summary")
			require.NoError(t, json.Unmarshal(e.Details[1], &summary))
			require.Equal(t, "type.googleapis.com/bmcis.search.v1.IngestDocumentsResponse", summary.Type)
			require.Equal(t, 1, summary.DocumentsFailed)
			require.Len(t, summary.Failures, 1)
			require.Equal(t, c.file, summary.Failures[0].SourceFile)
			require.NotEmpty(t, summary.Failures[0].Reason)
		})
	}

	var zb strings.Builder
	zw := zip.NewWriter(&zb)
	for name, body := range map[string]string{"a.md": "# A", "b.exe": "MZ"} {
		f, err := zw.Create(name)
		require.NoError(t, err)
		_, err = f.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	r := s.do("POST", "/v1/sources/docs/files?file=some.zip", zb.String(), rest.HeaderAdminToken, testIngestToken)
	require.Equal(t, http.StatusOK, r.status, "some files went in: %s", r.body)
	m := r.json(t)
	require.EqualValues(t, 1, m["documentsWritten"])
	require.EqualValues(t, 1, m["documentsFailed"])
}

// TestAdminRefusalsNameTheCredential: X-Admin-Token carries the admin
// credential on key routes and the ingest one on document and source
// routes, so a refusal says which one the route takes; a service's own
// "invalid service credential" alone leaves the operator guessing.
func TestAdminRefusalsNameTheCredential(t *testing.T) {
	s := newStack(t, nil)
	for _, tc := range []struct {
		name, method, path, body, token string
		status                          int
		code, credential                string
	}{
		{"no token, key route", "GET", "/v1/keys", "", "", 401, "ADMIN_TOKEN_REQUIRED", "the admin credential"},
		{"no token, deletion", "DELETE", "/v1/documents/doc-1", "", "", 401, "ADMIN_TOKEN_REQUIRED", "the ingest credential"},
		{"wrong token, key route", "GET", "/v1/keys", "", "wrong-token", 401, "ADMIN_TOKEN_INVALID", "the admin credential"},
		{"ingest token, key route", "GET", "/v1/keys", "", testIngestToken, 403, "ADMIN_TOKEN_INVALID", "the admin credential"},
		{"admin token, deletion", "DELETE", "/v1/documents/doc-1", "", testAdminToken, 403, "ADMIN_TOKEN_INVALID", "the ingest credential"},
		{"admin token, source route", "POST", "/v1/sources/wiki:sync", "{}", testAdminToken, 403, "ADMIN_TOKEN_INVALID", "the ingest credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.token != "" {
				hdr = []string{rest.HeaderAdminToken, tc.token}
			}
			r := s.do(tc.method, tc.path, tc.body, hdr...)
			require.Equal(t, tc.status, r.status, "body: %s", r.body)
			b := r.errBody(t)
			require.Equal(t, tc.code, b.Code)
			require.Contains(t, b.Message, tc.credential+" in "+rest.HeaderAdminToken)
		})
	}
}
