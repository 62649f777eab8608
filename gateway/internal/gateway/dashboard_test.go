package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/dashboard"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/schematest"
	"github.com/bmcis/knowledge/gateway/internal/stats"
)

func TestDashboardShapes(t *testing.T) {
	mcp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok","name":"bmcis-mcp-adapter","version":"1.2.3"}`))
	}))
	defer mcp.Close()
	s := newStack(t, map[string]string{"BMCIS_MCP_HEALTH_URL": mcp.URL + "/healthz"})
	s.waitConnected(backends.MCPAdapter)

	r := s.do("GET", "/api/health", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Health, r.body)
	var h dashboard.HealthResponse
	require.NoError(t, json.Unmarshal(r.body, &h))
	require.Equal(t, "ok", h.Status)
	require.Equal(t, dashboard.StateReady, h.State)
	require.Equal(t, "bmcis-gateway", h.ServerID)
	var names []string
	for _, srv := range h.Servers {
		names = append(names, srv.Name)
		require.Equal(t, health.StatusConnected, srv.Status, srv.Name)
		require.NotNil(t, srv.ServerInfo, srv.Name)
		require.NotNil(t, srv.LastStarted, srv.Name)
	}
	require.Equal(t, []string{backends.Search, backends.VendorGraph, backends.Auth, backends.MCPAdapter}, names)
	require.Equal(t, "grpc", h.Servers[0].TransportType)
	require.Equal(t, "1.2.3", h.Servers[3].ServerInfo.Version)
	adapterTools := []string{}
	for _, tl := range h.Servers[3].Capabilities.Tools {
		adapterTools = append(adapterTools, tl.Name)
	}
	require.ElementsMatch(t, []string{"semantic_search", "find_vendor_info", "get_chunks"}, adapterTools)
	templates := []string{}
	for _, rt := range h.Servers[3].Capabilities.ResourceTemplates {
		templates = append(templates, rt.URITemplate)
	}
	require.ElementsMatch(t, []string{"kb://chunks/{chunk_id}", "kb://vendors/{vendor_name}"}, templates)
	require.Empty(t, h.Servers[2].Capabilities.Tools, "auth backs no tool")
	require.NotContains(t, string(r.body), "127.0.0.1", "health is public: no internal addresses")

	r = s.do("GET", "/api/servers", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Servers, r.body)

	r = s.do("GET", "/api/tools", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Tools, r.body)
	var tl struct{ Tools []dashboard.ToolSummary }
	require.NoError(t, json.Unmarshal(r.body, &tl))
	require.Len(t, tl.Tools, 3)
	for _, x := range tl.Tools {
		require.True(t, x.Enabled, x.Name)
		require.Equal(t, backends.MCPAdapter, x.Server)
	}

	r = s.do("GET", "/api/config", "", rest.HeaderAdminToken, testAdminToken)
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Config, r.body)
	require.NotContains(t, string(r.body), testServiceToken)
	require.Contains(t, string(r.body), `"serviceToken":"[redacted]"`)
	require.Contains(t, string(r.body), `"mcpServers"`)

	// A few calls, then stats.
	for i := 0; i < 5; i++ {
		require.Equal(t, 200, s.do("POST", "/v1/search", `{"query":"cloud"}`, key(keyGood)...).status)
	}
	require.Equal(t, 429, s.do("POST", "/v1/search", `{"query":"cloud"}`, key(keyLimited)...).status)
	s.cacheHits.Add(3)
	s.cacheMisses.Add(1)
	// Wait for a scrape that saw them all (and a second one, for the chart):
	// the collector runs every BMCIS_GATEWAY_STATS_INTERVAL.
	var st stats.Response
	require.Eventually(t, func() bool {
		r = s.do("GET", "/api/stats", "", key(keyGood)...)
		st = stats.Response{}
		if r.status != 200 || json.Unmarshal(r.body, &st) != nil {
			return false
		}
		searched := false
		for _, rpc := range st.RPCs {
			searched = searched || (rpc.Method == "/bmcis.search.v1.SearchService/Search" && rpc.Requests == 5)
		}
		return searched && len(st.Cache) == 1 && st.Cache[0].Hits == 3 && st.RateLimit.GatewayDenials == 1 &&
			len(st.History) > 0 && len(st.Routes) > 0
	}, 10*time.Second, 50*time.Millisecond, "no scrape showed the calls")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Stats, r.body)
	var search *stats.RPCStat
	for i := range st.RPCs {
		require.False(t, strings.Contains(st.RPCs[i].Method, "grpc.health"), "health checks are left out")
		if st.RPCs[i].Method == "/bmcis.search.v1.SearchService/Search" {
			search = &st.RPCs[i]
		}
	}
	require.NotNil(t, search, "stats: %s", r.body)
	require.Equal(t, 5.0, search.Requests)
	require.NotNil(t, search.P50Ms)
	require.NotNil(t, search.P95Ms)
	require.GreaterOrEqual(t, *search.P95Ms, *search.P50Ms)
	require.Equal(t, "semantic_search", st.Tools[0].Name)
	require.Equal(t, "rpc", st.Tools[0].Source)
	require.Equal(t, 5.0, st.Tools[0].Requests)
	require.Len(t, st.Cache, 1)
	require.InDelta(t, 0.75, *st.Cache[0].HitRate, 1e-9)
	require.NotNil(t, st.RateLimit.ServiceDenials)
	require.Equal(t, 3.0, *st.RateLimit.ServiceDenials)
	require.Equal(t, 1.0, st.RateLimit.GatewayDenials)
	require.Equal(t, 3.0, st.Totals.RateLimitDenials)
	require.NotEmpty(t, st.History)
	require.NotEmpty(t, st.Routes)
}

// A stopped service turns disconnected; the gateway keeps serving the rest.
func TestStoppedServiceTurnsDisconnected(t *testing.T) {
	s := newStack(t, nil)
	s.fakes[backends.VendorGraph].stop()
	require.Eventually(t, func() bool {
		return s.gw.monitor.Probe(backends.VendorGraph).State().Status == health.StatusDisconnected
	}, 10*time.Second, 20*time.Millisecond)

	r := s.do("GET", "/api/health", "")
	require.Equal(t, 200, r.status)
	schematest.Validate(t, schematest.Health, r.body)
	var h dashboard.HealthResponse
	require.NoError(t, json.Unmarshal(r.body, &h))
	require.Equal(t, "error", h.Status)
	require.Equal(t, health.StatusDisconnected, h.Servers[1].Status)
	require.NotNil(t, h.Servers[1].Error)
	require.Nil(t, h.Servers[1].ServerInfo)
	require.Equal(t, health.StatusConnected, h.Servers[0].Status)
	require.NotContains(t, string(r.body), s.fakes[backends.VendorGraph].addr)

	// The rest keeps working; the stopped service's routes answer 503.
	require.Equal(t, 200, s.do("POST", "/v1/search", `{"query":"cloud"}`, key(keyGood)...).status)
	r = s.do("GET", "/v1/graph/status", "", key(keyGood)...)
	require.Equal(t, 503, r.status)
	e := r.errBody(t)
	require.Equal(t, "UNAVAILABLE", e.Code)
	require.Equal(t, "vendorgraph service unavailable", e.Message)

	var tl struct{ Tools []dashboard.ToolSummary }
	r = s.do("GET", "/api/tools", "")
	require.NoError(t, json.Unmarshal(r.body, &tl))
	for _, x := range tl.Tools {
		require.Equal(t, x.Name != "find_vendor_info", x.Enabled, x.Name)
	}
	require.Eventually(t, func() bool {
		r = s.do("GET", "/api/stats", "", key(keyGood)...)
		return r.status == 200 && strings.Contains(string(r.body), `"name":"vendorgraph","scraped":false`)
	}, 5*time.Second, 50*time.Millisecond)
	schematest.Validate(t, schematest.Stats, r.body)
}

func TestMCPAdapterStatuses(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	s := newStack(t, map[string]string{"BMCIS_MCP_HEALTH_URL": failing.URL})
	require.Eventually(t, func() bool { return s.gw.monitor.Probe(backends.MCPAdapter).State().Status == health.StatusError }, 5*time.Second, 20*time.Millisecond)
	failing.Close()
	require.Eventually(t, func() bool {
		return s.gw.monitor.Probe(backends.MCPAdapter).State().Status == health.StatusDisconnected
	}, 5*time.Second, 20*time.Millisecond)
	r := s.do("GET", "/api/health", "")
	schematest.Validate(t, schematest.Health, r.body)
	var h dashboard.HealthResponse
	require.NoError(t, json.Unmarshal(r.body, &h))
	require.Equal(t, "ok", h.Status, "the adapter does not decide the gateway's status")
	var tl struct{ Tools []dashboard.ToolSummary }
	require.NoError(t, json.Unmarshal(s.do("GET", "/api/tools", "").body, &tl))
	for _, x := range tl.Tools {
		require.False(t, x.Enabled, "no tool answers while the adapter is down")
	}
}

func TestOpenAPIDocument(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("GET", "/openapi.json", "")
	require.Equal(t, 200, r.status)
	var doc struct {
		Swagger             string                               `json:"swagger"`
		Info                map[string]any                       `json:"info"`
		SecurityDefinitions map[string]any                       `json:"securityDefinitions"`
		Paths               map[string]map[string]map[string]any `json:"paths"`
		Definitions         map[string]any                       `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	require.Equal(t, "2.0", doc.Swagger)
	require.Equal(t, "BMCIS Knowledge REST API", doc.Info["title"])
	require.Contains(t, doc.SecurityDefinitions, "ApiKey")
	require.Contains(t, doc.SecurityDefinitions, "AdminToken")
	require.Contains(t, doc.Definitions, "gatewayError")
	require.Contains(t, doc.Paths["/v1/keys"]["post"], "security")
	require.NotContains(t, doc.Paths["/v1/search"]["post"], "security")
	paths := map[string]bool{}
	for _, rt := range rest.Routes {
		paths[regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(rt.Path, "{}")] = true
	}
	require.Len(t, doc.Paths, len(paths))
}

func TestDashboardPageIsSelfContained(t *testing.T) {
	s := newStack(t, nil)
	r := s.do("GET", "/", "")
	require.Equal(t, 200, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/html")
	require.Contains(t, r.header.Get("Content-Security-Policy"), "script-src 'self'")
	page := string(r.body)
	require.Contains(t, page, `src="/assets/app.js"`)
	for _, f := range []string{"/assets/app.js", "/assets/app.css"} {
		a := s.do("GET", f, "")
		require.Equal(t, 200, a.status, f)
		page += string(a.body)
	}
	// No CDN, no remote font, nothing fetched from elsewhere.
	for _, m := range regexp.MustCompile(`(?:src|href|url)\s*[=(]\s*["']?(https?:)?//`).FindAllString(page, -1) {
		t.Errorf("the page loads something remote: %s", m)
	}
	require.NotContains(t, page, "innerHTML", "data is inserted as text only")
	require.Equal(t, 404, s.do("GET", "/assets/", "").status)
	require.Equal(t, 404, s.do("GET", "/assets/nope.js", "").status)
}
