package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// One tool call is one trace: the adapter (over stdio, exporting OTLP/HTTP)
// and the services (exporting OTLP/gRPC) send their spans to a real OTLP
// receiver, and the search service's PostgreSQL queries hang under the
// adapter's tool span through the gRPC calls. Every log line of the call
// carries the trace id.
func TestOneToolCallIsOneTrace(t *testing.T) {
	otlp := stacktest.StartOTLP(t)
	s := stacktest.Start(t, stacktest.Options{Env: otlp.Env("grpc")})
	// Two chunks train the builtin embedder, so a search also queries
	// pgvector in PostgreSQL (BM25 is answered from memory).
	s.IngestDocs(t, map[string]string{
		"guides/laptops.md": "# Laptops\n\nEvery laptop ships with full-disk encryption turned on.\n",
		"guides/travel.md":  "# Travel\n\nA laptop taken abroad keeps its data safe thanks to encryption.\n",
	})
	s.Service(stacktest.Search).WaitLog(t, "builtin embedder trained", 10*time.Second)
	key := s.CreateKey(t, stacktest.Key{Name: "trace-e2e"})

	var adapterLog stacktest.SyncBuffer
	env := map[string]string{"BMCIS_API_KEY": key, "BMCIS_LOG_LEVEL": "info"}
	for k, v := range otlp.Env("http/protobuf") {
		env[k] = v
	}
	c, err := client.NewStdioMCPClientWithOptions(stacktest.Binary(t, "mcp-adapter"), s.AdapterEnv(env), nil,
		mcptransport.WithCommandStderrWriter(&adapterLog))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Close()
		if t.Failed() {
			t.Logf("--- mcp-adapter log\n%s", adapterLog.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-trace", Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)

	res := callTool(t, c, "semantic_search", map[string]any{"query": "laptop encryption"})
	require.Equal(t, "success", status(res), "%v", res)

	// The tool's span names the trace.
	var traceID string
	require.Eventually(t, func() bool {
		for _, sp := range otlp.Spans() {
			if sp.Service == "mcp-adapter" && sp.Name == "tool.semantic_search" {
				traceID = sp.TraceID
				return true
			}
		}
		return false
	}, 15*time.Second, 50*time.Millisecond, "no tool span arrived")

	// Wait for the search service's database spans and the adapter's root.
	isDB := func(sp stacktest.Span) bool { return sp.Attrs["db.system.name"] == "postgresql" }
	require.Eventually(t, func() bool {
		var db, root bool
		for _, sp := range otlp.Trace(traceID) {
			db = db || (sp.Service == "search" && isDB(sp))
			root = root || sp.ParentID == ""
		}
		return db && root
	}, 15*time.Second, 50*time.Millisecond, "the trace never held search's database spans and its root")
	time.Sleep(300 * time.Millisecond) // the last batches of every process

	// One root, the adapter's MCP request.
	root, byID := otlp.RequireOneTree(t, traceID)
	require.Equal(t, "mcp-adapter", root.Service)
	require.Equal(t, "mcp.tools/call", root.Name)
	spans := otlp.Trace(traceID)

	// Each search database span descends from search's server span, the
	// adapter's client call and the tool span.
	path := func(sp stacktest.Span) []string {
		var out []string
		for {
			out = append(out, sp.Service+" "+kindName(sp.Kind)+" "+sp.Name)
			p, ok := byID[sp.ParentID]
			if !ok {
				return out
			}
			sp = p
		}
	}
	dbSpans := 0
	for _, sp := range spans {
		if sp.Service != "search" || !isDB(sp) {
			continue
		}
		dbSpans++
		chain := strings.Join(path(sp), " <- ")
		require.Contains(t, chain, "search server bmcis.search.v1.SearchService/", chain)
		require.Contains(t, chain, "mcp-adapter client bmcis.search.v1.SearchService/", chain)
		require.Contains(t, chain, "mcp-adapter internal tool.semantic_search", chain)
		require.True(t, strings.HasSuffix(chain, "mcp-adapter server mcp.tools/call"), chain)
	}
	require.Positive(t, dbSpans)

	// The auth check is in the same trace, Redis included when auth uses it.
	services := map[string]bool{}
	redis := false
	for _, sp := range spans {
		services[sp.Service] = true
		redis = redis || (sp.Service == "auth" && (sp.Attrs["db.system"] == "redis" || sp.Attrs["db.system.name"] == "redis"))
	}
	require.True(t, services["auth"], "no auth span in the trace: %v", services)
	if os.Getenv(stacktest.EnvRedisURL) != "" {
		require.True(t, redis, "auth uses Redis but no Redis span is in the trace")
	}

	// The call's log lines carry the trace id: the adapter's tool call line
	// and the services' rpc lines.
	tid := `"trace_id":"` + traceID + `"`
	require.Eventually(t, func() bool { return strings.Contains(adapterLog.String(), tid) }, 5*time.Second, 20*time.Millisecond,
		"the adapter logged no line with the trace id")
	for _, name := range []string{stacktest.Search, stacktest.Auth} {
		require.True(t, s.Service(name).LogContains(tid), "%s logged no line with the trace id", name)
	}
}

func kindName(k tracepb.Span_SpanKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "SPAN_KIND_"))
}
