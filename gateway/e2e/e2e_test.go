package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/dashboard"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/schematest"
	"github.com/bmcis/knowledge/gateway/internal/stats"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

func TestHealthAndShapesAgainstServices(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("GET", "/api/health", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Health, r.body)
	var h dashboard.HealthResponse
	require.NoError(t, json.Unmarshal(r.body, &h))
	require.Equal(t, "ok", h.Status)
	require.Equal(t, dashboard.StateReady, h.State)
	require.Len(t, h.Servers, 4)
	for _, srv := range h.Servers[:3] {
		require.Equal(t, health.StatusConnected, srv.Status, srv.Name)
		require.Equal(t, "grpc", srv.TransportType)
		require.NotNil(t, srv.ServerInfo, srv.Name)
		require.NotNil(t, srv.LastStarted, srv.Name)
		started, err := time.Parse(time.RFC3339Nano, *srv.LastStarted)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), started, 10*time.Minute, "lastStarted comes from the process start time")
	}
	require.Equal(t, backends.MCPAdapter, h.Servers[3].Name)

	for path, def := range map[string]string{"/api/servers": schematest.Servers, "/api/tools": schematest.Tools} {
		r := s.do("GET", path, "")
		require.Equal(t, 200, r.status, path)
		schematest.Validate(t, def, r.body)
	}
	require.Equal(t, 200, s.do("GET", "/openapi.json", "").status)

	// Stats come from the services' own /metrics; the route needs a key, so
	// the shape is checked through the same code path directly as well.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.search.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	var st stats.Response
	require.Eventually(t, func() bool {
		st = s.gw.Stats(ctx)
		for _, r := range st.RPCs {
			if r.Method == "/bmcis.search.v1.SearchService/GetIndexStatus" {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "GetIndexStatus never showed in the stats")
	b, err := json.Marshal(st)
	require.NoError(t, err)
	schematest.Validate(t, schematest.Stats, b)
	for _, svc := range st.Services {
		require.True(t, svc.Scraped, "%s: %v", svc.Name, svc.Error)
	}
	for _, r := range st.RPCs {
		require.NotContains(t, r.Method, "grpc.health", "health checks are left out of the stats")
	}
	// The stats route needs a key.
	r = s.do("GET", "/api/stats", "")
	require.Equal(t, http.StatusUnauthorized, r.status, "body: %s", r.body)
	schematest.Validate(t, schematest.Error, r.body)
	require.Equal(t, "AUTH_REQUIRED", r.errBody(t).Code)
}

// Every REST route answers what its RPC answers when called directly:
// same status (through the one mapping), same body (but timings).
func TestRoutesMatchDirectGRPC(t *testing.T) {
	s := newStack(t, nil)
	key := s.createKey(`{"name":"e2e-routes"}`)
	s.ingest()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adminCtx := grpcclient.WithCredential(ctx, adminToken)
	ingestCtx := grpcclient.WithCredential(ctx, ingestToken)
	k := []string{rest.HeaderAPIKey, key}
	a := []string{rest.HeaderAdminToken, adminToken}
	in := []string{rest.HeaderAdminToken, ingestToken}

	cases := []struct {
		name, method, path, body string
		headers                  []string
		direct                   func() (proto.Message, error)
	}{
		{"search", "POST", "/v1/search", `{"query":"cloud providers","limit":5}`, k, func() (proto.Message, error) {
			return s.search.Search(ctx, &searchv1.SearchRequest{Query: "cloud providers", Limit: 5})
		}},
		{"search bm25", "POST", "/v1/search", `{"query":"object storage","mode":"RETRIEVAL_MODE_BM25","limit":3}`, k, func() (proto.Message, error) {
			return s.search.Search(ctx, &searchv1.SearchRequest{Query: "object storage", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 3})
		}},
		// An omitted limit is the documented default, not a 400.
		{"search default limit", "POST", "/v1/search", `{"query":"cloud providers"}`, k, func() (proto.Message, error) {
			return s.search.Search(ctx, &searchv1.SearchRequest{Query: "cloud providers", Limit: rest.DefaultSearchLimit})
		}},
		{"search empty query", "POST", "/v1/search", `{"query":""}`, k, func() (proto.Message, error) {
			return s.search.Search(ctx, &searchv1.SearchRequest{})
		}},
		{"chunks", "GET", "/v1/chunks?chunk_ids=1&chunk_ids=987654321", "", k, func() (proto.Message, error) {
			return s.search.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{1, 987654321}})
		}},
		{"categories", "GET", "/v1/categories", "", k, func() (proto.Message, error) {
			return s.search.ListCategories(ctx, &searchv1.ListCategoriesRequest{})
		}},
		{"index status", "GET", "/v1/index/status", "", k, func() (proto.Message, error) {
			return s.search.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		}},
		{"vendor", "GET", "/v1/vendors/No%20Such%20Vendor", "", k, func() (proto.Message, error) {
			return s.vendor.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "No Such Vendor"})
		}},
		{"suggestions", "GET", "/v1/vendor-suggestions?text=ac&limit=3", "", k, func() (proto.Message, error) {
			return s.vendor.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "ac", Limit: 3})
		}},
		{"graph status", "GET", "/v1/graph/status", "", k, func() (proto.Message, error) {
			return s.vendor.GetGraphStatus(ctx, &vendorgraphv1.GetGraphStatusRequest{})
		}},
		{"list keys", "GET", "/v1/keys?owner=nobody-e2e", "", a, func() (proto.Message, error) {
			return s.auth.ListKeys(adminCtx, &authv1.ListKeysRequest{Owner: "nobody-e2e"})
		}},
		{"revoke unknown key", "POST", "/v1/keys/nokey0000:revoke", `{}`, a, func() (proto.Message, error) {
			return s.auth.RevokeKey(adminCtx, &authv1.RevokeKeyRequest{KeyId: "nokey0000"})
		}},
		{"rotate unknown key", "POST", "/v1/keys/nokey0000:rotate", `{"overlap":"0s"}`, a, func() (proto.Message, error) {
			return s.auth.RotateKey(adminCtx, &authv1.RotateKeyRequest{KeyId: "nokey0000", Overlap: durationpb.New(0)})
		}},
		{"delete unknown document", "DELETE", "/v1/documents/no-such-doc", "", in, func() (proto.Message, error) {
			return s.search.DeleteDocument(ingestCtx, &searchv1.DeleteDocumentRequest{ExternalId: "no-such-doc"})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := c.direct()
			r := s.do(c.method, c.path, c.body, c.headers...)
			wantStatus := apierror.HTTPStatus(status.Code(err))
			require.Equal(t, wantStatus, r.status, "direct: %v; REST body: %s", err, r.body)
			require.NotEqual(t, codes.Unimplemented, status.Code(err), "every route's RPC is implemented")
			if err != nil {
				schematest.Validate(t, schematest.Error, r.body)
				e := r.errBody(t)
				require.NotEmpty(t, e.Code)
				return
			}
			wantJSON, err := (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(want)
			require.NoError(t, err)
			require.Equal(t, normalize(t, wantJSON), normalize(t, r.body))
		})
	}
}

// The search routes answer from the ingested documents: known ranks,
// fields and statuses.
func TestSearchRoutesAgainstServices(t *testing.T) {
	s := newStack(t, nil)
	key := s.createKey(`{"name":"e2e-search"}`)
	s.ingest()
	type result struct {
		Chunk struct {
			ChunkID        string `json:"chunkId"`
			SourceFile     string `json:"sourceFile"`
			SourceCategory string `json:"sourceCategory"`
			Title          string `json:"title"`
			ChunkText      string `json:"chunkText"`
		} `json:"chunk"`
		Rank        int      `json:"rank"`
		HybridScore float64  `json:"hybridScore"`
		BM25Rank    int      `json:"bm25Rank"`
		Matched     []string `json:"matchedTerms"`
	}
	type searchResp struct {
		Results        []result `json:"results"`
		TotalAvailable int      `json:"totalAvailable"`
		QueryTerms     []string `json:"queryTerms"`
	}
	for _, c := range []struct{ query, mode, file string }{
		{"cloud providers pricing", "RETRIEVAL_MODE_HYBRID", "guides/cloud-providers.md"},
		{"object storage buckets lifecycle", "RETRIEVAL_MODE_BM25", "guides/object-storage.md"},
		{"vendor onboarding compliance", "RETRIEVAL_MODE_BM25", "guides/vendor-onboarding.md"},
	} {
		r := s.do("POST", "/v1/search", `{"query":"`+c.query+`","mode":"`+c.mode+`","limit":3}`, rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", c.query, r.body)
		var sr searchResp
		require.NoError(t, json.Unmarshal(r.body, &sr))
		require.NotEmpty(t, sr.Results, c.query)
		top := sr.Results[0]
		require.Equal(t, 1, top.Rank)
		require.Equal(t, c.file, top.Chunk.SourceFile, "%s: the document naming the words ranks first", c.query)
		require.Equal(t, "guides", top.Chunk.SourceCategory)
		require.NotEmpty(t, top.Chunk.ChunkText)
		require.NotEmpty(t, top.Chunk.ChunkID)
		require.Greater(t, top.HybridScore, 0.0)
		require.Equal(t, 1, top.BM25Rank)
		require.NotEmpty(t, top.Matched)
		require.NotEmpty(t, sr.QueryTerms)
		require.GreaterOrEqual(t, sr.TotalAvailable, len(sr.Results))
		for i, res := range sr.Results {
			require.Equal(t, i+1, res.Rank)
		}
	}
	// The chunk the search found is served by id; an unknown id is reported
	// missing; the category is listed with its document count.
	r := s.do("POST", "/v1/search", `{"query":"cloud providers pricing","limit":1}`, rest.HeaderAPIKey, key)
	var sr searchResp
	require.NoError(t, json.Unmarshal(r.body, &sr))
	id := sr.Results[0].Chunk.ChunkID
	r = s.do("GET", "/v1/chunks?chunk_ids="+id+"&chunk_ids=987654321", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var cr struct {
		Chunks []struct {
			ChunkID    string `json:"chunkId"`
			SourceFile string `json:"sourceFile"`
		} `json:"chunks"`
		MissingIDs []string `json:"missingIds"`
	}
	require.NoError(t, json.Unmarshal(r.body, &cr))
	require.Len(t, cr.Chunks, 1)
	require.Equal(t, id, cr.Chunks[0].ChunkID)
	require.Equal(t, "guides/cloud-providers.md", cr.Chunks[0].SourceFile)
	require.Equal(t, []string{"987654321"}, cr.MissingIDs)
	r = s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"categories":[{"name":"guides","documentCount":3}]}`, string(r.body))
	r = s.do("POST", "/v1/search", `{"query":""}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	schematest.Validate(t, schematest.Error, r.body)
	for _, bad := range []string{"0", "-1"} {
		// No chunk has such an id: a mistake, not a missing chunk.
		r = s.do("GET", "/v1/chunks?chunk_ids="+id+"&chunk_ids="+bad, "", rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", bad, r.body)
		schematest.Validate(t, schematest.Error, r.body)
		require.Contains(t, string(r.body), "positive", bad)
	}
}

// normalize drops what legitimately differs between two calls: timings,
// cache flags and timestamps of "last used".
func normalize(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"searchTimeMs", "databaseTimeMs", "cacheHit", "lastUsedAt"} {
				delete(x, k)
			}
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

func TestAuthAgainstServices(t *testing.T) {
	s := newStack(t, nil)
	// Admin routes: a missing token never reaches the auth service.
	r := s.do("GET", "/v1/keys", "")
	require.Equal(t, 401, r.status)
	require.Equal(t, "ADMIN_TOKEN_REQUIRED", r.errBody(t).Code)
	r = s.do("GET", "/v1/keys", "", rest.HeaderAdminToken, "not-the-admin-token")
	require.Contains(t, []int{401, 403}, r.status, "a wrong admin token: %s", r.body)
	require.Equal(t, 200, s.do("GET", "/v1/keys", "", rest.HeaderAdminToken, adminToken).status)

	for _, c := range []struct {
		headers []string
		status  int
		code    string
	}{
		{nil, 401, "AUTH_REQUIRED"},
		{[]string{rest.HeaderAPIKey, "bmcis_unknown_secretsecret"}, 401, "AUTH_INVALID"},
		{[]string{"Authorization", "Bearer not-a-key"}, 401, "AUTH_INVALID"},
	} {
		r := s.do("POST", "/v1/search", `{"query":"cloud"}`, c.headers...)
		require.Equal(t, c.status, r.status, "body: %s", r.body)
		require.Equal(t, c.code, r.errBody(t).Code)
	}

	key := s.createKey(`{"name":"e2e-limited","limits":{"tiers":[{"tier":"minute","value":2},{"tier":"hour","value":100},{"tier":"day","value":1000}]}}`)
	var last response
	for i := 0; i < 4; i++ {
		last = s.do("GET", "/v1/categories", "", "Authorization", "Bearer "+key)
		if last.status == http.StatusTooManyRequests {
			break
		}
	}
	require.Equal(t, http.StatusTooManyRequests, last.status, "a 2-per-minute key must hit its limit: %s", last.body)
	require.Equal(t, "RATE_LIMIT", last.errBody(t).Code)
	require.NotEmpty(t, last.header.Get("Retry-After"))

	// Revocation reaches the gateway within the verified-key cache's 30 s.
	key2 := s.createKey(`{"name":"e2e-revoked"}`)
	require.True(t, passedAuth(s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, key2)), "a new key is accepted")
	keyID := strings.SplitN(strings.TrimPrefix(key2, "bmcis_"), "_", 2)[0]
	r = s.do("POST", "/v1/keys/"+keyID+":revoke", `{}`, rest.HeaderAdminToken, adminToken)
	require.Equal(t, 200, r.status, "revoke: %s", r.body)
	require.Eventually(t, func() bool {
		r := s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, key2)
		return r.status == http.StatusForbidden && r.errBody(t).Code == "AUTH_REVOKED"
	}, 40*time.Second, 500*time.Millisecond)
}

// passedAuth reports whether a response got past the credential check,
// whatever the service then answered.
func passedAuth(r response) bool {
	switch r.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return false
	case http.StatusServiceUnavailable:
		return !strings.Contains(string(r.body), "AUTH_UNAVAILABLE")
	}
	return true
}

// A stopped service turns disconnected and the gateway keeps serving the rest.
func TestStoppedServiceAgainstServices(t *testing.T) {
	s := newStack(t, nil)
	key := s.createKey(`{"name":"e2e-stop"}`)
	s.ingest()
	s.stop(backends.VendorGraph)
	h := s.waitStatus(health.StatusDisconnected, backends.VendorGraph)
	require.Equal(t, "error", h.Status)
	for _, srv := range h.Servers {
		if srv.Name == backends.Search || srv.Name == backends.Auth {
			require.Equal(t, health.StatusConnected, srv.Status, srv.Name)
		}
	}
	r := s.do("GET", "/api/health", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Health, r.body)
	require.Equal(t, 200, s.do("GET", "/api/tools", "").status)
	require.Equal(t, 200, s.do("GET", "/", "").status)

	// The search routes keep serving; the vendorgraph ones answer 503.
	r = s.do("GET", "/v1/index/status", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "search keeps serving: %s", r.body)
	require.Contains(t, string(r.body), `"documents":"3"`)
	r = s.do("POST", "/v1/search", `{"query":"object storage buckets","limit":1}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "guides/object-storage.md")
	r = s.do("GET", "/v1/graph/status", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "vendorgraph service unavailable", r.errBody(t).Message)

	// Without auth the gateway fails closed.
	s.stop(backends.Auth)
	s.waitStatus(health.StatusDisconnected, backends.Auth)
	r = s.do("GET", "/v1/index/status", "", rest.HeaderAPIKey, "bmcis_any_key")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "AUTH_UNAVAILABLE", r.errBody(t).Code)
	require.NotEmpty(t, r.header.Get("Retry-After"))
}
