package e2e

// The stack under test: the real search, vendorgraph and auth binaries run
// by platform/stacktest (built from this repository once per test run, on a
// fresh migrated database per test), and the gateway in-process in front of
// them.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/dashboard"
	"github.com/bmcis/knowledge/gateway/internal/gateway"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/stacktest"
)

const (
	serviceToken = stacktest.ServiceToken
	adminToken   = stacktest.AdminToken
	ingestToken  = stacktest.IngestToken
)

// serviceNames are the services behind the gateway, in its own names (the
// same as stacktest's).
var serviceNames = []string{backends.Search, backends.VendorGraph, backends.Auth}

func TestMain(m *testing.M) { stacktest.Main(m) }

// stack is the three services (platform/stacktest) and a gateway in front
// of them.
type stack struct {
	t      testing.TB
	st     *stacktest.Stack
	gw     *gateway.Gateway
	url    string
	conns  map[string]*grpc.ClientConn
	search searchv1.SearchServiceClient
	vendor vendorgraphv1.VendorGraphServiceClient
	auth   authv1.AuthServiceClient
}

func newStack(t testing.TB, env map[string]string) *stack {
	t.Helper()
	return newStackWith(t, stacktest.Options{}, env)
}

// newStackWith is newStack on services started with opts.
func newStackWith(t testing.TB, opts stacktest.Options, env map[string]string) *stack {
	t.Helper()
	st := stacktest.Start(t, opts)
	s := &stack{t: t, st: st, conns: map[string]*grpc.ClientConn{}}
	vars := map[string]string{
		"BMCIS_SERVICE_TOKEN":           serviceToken,
		"BMCIS_MCP_HEALTH_URL":          "off",
		"BMCIS_GATEWAY_METRICS_ADDR":    "off",
		"BMCIS_GATEWAY_HEALTH_INTERVAL": "200ms",
		"BMCIS_GATEWAY_HEALTH_TIMEOUT":  "500ms",
		"BMCIS_GATEWAY_STATS_INTERVAL":  "300ms",
		// The stack's credentials are published ones (platform/stacktest).
		config.EnvAllowInsecureSecrets: "true",
	}
	for _, name := range serviceNames {
		p := st.Service(name)
		up := strings.ToUpper(name)
		vars["BMCIS_"+up+"_ADDR"] = p.Addr()
		vars["BMCIS_"+up+"_METRICS_URL"] = p.MetricsURL()
	}
	for k, v := range env {
		vars[k] = v
	}
	r := config.FromMap(vars)
	cfg := settings.Load(r)
	require.NoError(t, r.Err())
	gw, err := gateway.New(cfg, logging.New(io.Discard, "gateway", "error"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gw.Start(ctx)
	srv := httptest.NewServer(gw.Handler())
	s.gw, s.url = gw, srv.URL
	for _, name := range serviceNames {
		conn, err := grpcclient.Dial(st.Addr(name), serviceToken)
		require.NoError(t, err)
		s.conns[name] = conn
	}
	s.search = searchv1.NewSearchServiceClient(s.conns[backends.Search])
	s.vendor = vendorgraphv1.NewVendorGraphServiceClient(s.conns[backends.VendorGraph])
	s.auth = authv1.NewAuthServiceClient(s.conns[backends.Auth])
	t.Cleanup(func() {
		srv.Close()
		cancel()
		gw.Close()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	s.waitStatus(health.StatusConnected, backends.Search, backends.VendorGraph, backends.Auth)
	return s
}

// stop stops one of the services.
func (s *stack) stop(name string) { s.st.Service(name).Stop(s.t) }

// waitStatus waits until /api/health reports every named server in st.
func (s *stack) waitStatus(st string, names ...string) dashboard.HealthResponse {
	s.t.Helper()
	var h dashboard.HealthResponse
	require.Eventually(s.t, func() bool {
		h = s.gw.Health()
		for _, srv := range h.Servers {
			for _, n := range names {
				if srv.Name == n && srv.Status != st {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "servers %v did not turn %s", names, st)
	return h
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errBody(t testing.TB) apierror.Body {
	t.Helper()
	var e apierror.Body
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.NotNil(t, e.Details, "details must be an array: %s", r.body)
	return e
}

func (s *stack) do(method, path, body string, headers ...string) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	require.NoError(s.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// createKey makes an API key through the gateway's REST admin route.
func (s *stack) createKey(body string) string {
	s.t.Helper()
	r := s.do("POST", "/v1/keys", body, rest.HeaderAdminToken, adminToken)
	require.Equal(s.t, http.StatusOK, r.status, "create key: %s", r.body)
	var resp struct {
		APIKey string `json:"apiKey"`
	}
	require.NoError(s.t, json.Unmarshal(r.body, &resp))
	require.True(s.t, strings.HasPrefix(resp.APIKey, "bmcis_"), "key %q", resp.APIKey)
	return resp.APIKey
}

// ingest loads demoDocs through the search service (bmcisctl ingest, as an
// operator does): source file guides/<name>.md, category "guides".
func (s *stack) ingest() {
	s.t.Helper()
	docs := map[string]string{}
	for name, text := range demoDocs {
		docs["guides/"+name+".md"] = text
	}
	sum := s.st.IngestDocs(s.t, docs)
	require.Equal(s.t, len(demoDocs), sum.Written, "ingest: %+v", sum)
}

// demoDocs are small documents whose ranking the tests know: each query
// below names words of exactly one of them.
var demoDocs = map[string]string{
	"cloud-providers": "# Cloud providers\n\nAWS, Azure and Google Cloud Platform are the leading cloud providers. " +
		"Each offers compute, storage and networking with distinct pricing models.\n",
	"object-storage": "# Object storage\n\nObject storage keeps blobs in buckets; S3-compatible APIs are common. " +
		"Lifecycle rules move cold data to cheaper tiers.\n",
	"vendor-onboarding": "# Vendor onboarding\n\nNew vendors are reviewed for security and compliance before contracts are signed.\n",
}
