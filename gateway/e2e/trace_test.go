package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/tracing"
)

// A REST search through the gateway is one trace: the gateway's HTTP span
// (exported from this process, set up as the binary does), the auth check
// and the search call, down to search's PostgreSQL queries, all received
// over OTLP by a real receiver.
func TestRESTCallIsOneTrace(t *testing.T) {
	otlp := stacktest.StartOTLP(t)
	for k, v := range otlp.Env(tracing.ProtocolGRPC) {
		t.Setenv(k, v) // the services inherit the test's environment
	}
	cfg := tracing.LoadConfig(config.FromEnv())
	require.True(t, cfg.Enabled)
	stop, err := tracing.Start(context.Background(), cfg, "gateway", slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() {
		stop()
		otel.SetTracerProvider(noop.NewTracerProvider())
	})

	s := newStack(t, nil)
	key := s.createKey(`{"name":"e2e-trace"}`)
	// Two chunks sharing terms train the builtin embedder, so a hybrid
	// search also queries pgvector (BM25 is answered from memory).
	s.st.IngestDocs(t, map[string]string{
		"guides/laptops.md": "# Laptops\n\nEvery laptop ships with full-disk encryption turned on.\n",
		"guides/travel.md":  "# Travel\n\nA laptop taken abroad keeps its data safe thanks to encryption.\n",
	})
	s.st.Service(stacktest.Search).WaitLog(t, "builtin embedder trained", 10*time.Second)

	r := s.do("POST", "/v1/search", `{"query":"laptop encryption","mode":"RETRIEVAL_MODE_HYBRID","limit":3}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// The search service's database spans name the trace; wait for its
	// root, the gateway's server span.
	var traceID string
	require.Eventually(t, func() bool {
		for _, sp := range otlp.Spans() {
			if sp.Service == "search" && sp.Attrs["db.system.name"] == "postgresql" {
				for _, o := range otlp.Trace(sp.TraceID) {
					if o.Service == "gateway" && o.ParentID == "" {
						traceID = sp.TraceID
						return true
					}
				}
			}
		}
		return false
	}, 15*time.Second, 50*time.Millisecond, "no trace from the gateway down to search's database arrived")
	time.Sleep(300 * time.Millisecond) // the last batches

	root, byID := otlp.RequireOneTree(t, traceID)
	require.Equal(t, "gateway", root.Service)
	require.Equal(t, "SERVER", strings.TrimPrefix(root.Kind.String(), "SPAN_KIND_"))
	services := map[string]bool{}
	for _, sp := range otlp.Trace(traceID) {
		services[sp.Service] = true
		if sp.Service != "search" || sp.Attrs["db.system.name"] != "postgresql" {
			continue
		}
		// search's query <- search's server span <- the gateway's client call.
		var chain []string
		for p, ok := sp, true; ok; p, ok = byID[p.ParentID] {
			chain = append(chain, p.Service+" "+p.Kind.String()+" "+p.Name)
		}
		joined := strings.Join(chain, " <- ")
		require.Contains(t, joined, "search SPAN_KIND_SERVER bmcis.search.v1.SearchService/Search", joined)
		require.Contains(t, joined, "gateway SPAN_KIND_CLIENT bmcis.search.v1.SearchService/Search", joined)
	}
	require.True(t, services["auth"] && services["search"], "%v", services)
}
