package tools_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// BenchmarkSemanticSearchMetadata measures one cached metadata page of 10
// through the adapter alone (in-process MCP client, stand-in backends over
// bufconn), to watch the adapter's own cost. The end-to-end benchmark
// against the real services is e2e.TestBenchEndToEnd (docs/BENCHMARKS.md).
func BenchmarkSemanticSearchMetadata(b *testing.B) {
	for _, format := range []string{"json", "markdown", "both"} {
		b.Run(format, func(b *testing.B) {
			h := newHarness(b, func(o *tools.Options) { o.ValidateOutput = false })
			req := mcp.CallToolRequest{}
			req.Params.Name = tools.ToolSemanticSearch
			req.Params.Arguments = map[string]any{"query": "incident severity levels", "page_size": 10, "format": format}
			ctx := context.Background()
			if _, err := h.cli.CallTool(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := h.cli.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuthFirst is what authenticating before any backend work costs
// a tool call against the real services (demo stack, in-process MCP
// client): "check-then-call" waits for auth.Check before the backend call
// (allow cache off); "allow-cache" lets a key allowed a moment ago run
// both at once (the default). docs/BENCHMARKS.md records the figures.
func BenchmarkAuthFirst(b *testing.B) {
	calls := []struct {
		name string
		args map[string]any
	}{
		{tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "page_size": 10}},
		{tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"}},
	}
	for _, c := range calls {
		for _, mode := range []string{"check-then-call", "allow-cache"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				var hopts []harnessOpt
				if mode == "check-then-call" {
					hopts = append(hopts, func(o *tools.Options) { o.AllowCache = nil })
				}
				h := newRealWithClient(b, nil, nil, hopts)
				req := mcp.CallToolRequest{}
				req.Params.Name = c.name
				req.Params.Arguments = c.args
				ctx := context.Background()
				if _, err := h.cli.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := h.cli.CallTool(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAuditOverhead is what the audit trail adds to a tool call
// against the real services (demo stack, in-process MCP client, a cached
// metadata page of 10): "off" records nothing, "on" records every call
// through platform/auditlog to the real auth service. docs/BENCHMARKS.md
// ("Audit trail") records the figures.
func BenchmarkAuditOverhead(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			var hopts []harnessOpt
			if mode == "on" {
				hopts = append(hopts, func(o *tools.Options) {
					rec, err := auditlog.New(o.Clients.Auth, auditlog.Config{QueryText: true})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { rec.Close(context.Background()) })
					o.Audit = rec
				})
			}
			h := newRealWithClient(b, nil, nil, hopts)
			req := mcp.CallToolRequest{}
			req.Params.Name = tools.ToolSemanticSearch
			req.Params.Arguments = map[string]any{"query": "incident severity levels", "page_size": 10}
			ctx := context.Background()
			if _, err := h.cli.CallTool(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := h.cli.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHTTPCall is one tools/call semantic_search as the binary serves
// it over streamable HTTP (transport.HTTPHandler, the audit trail and the
// per-tool metrics on, output validation off, the allow cache, key leases
// and the answer cache as configured: all on by default, with the adapter's
// credential; BMCIS_MCP_ANSWER_CACHE_TTL=0 turns the answer cache off),
// posted by a plain HTTP client to the
// real services of the demo stack: the adapter's own per-call cost without
// mcp-go's client decoding the answer (issue 32); "semantic_search/scoped"
// is the same call with a key that has a group. "search" and "auth.Check"
// are the two gRPC calls it makes, alone, for the floor.
func BenchmarkHTTPCall(b *testing.B) {
	var rec *auditlog.Recorder
	var cache *allowcache.Cache
	var answers *tools.AnswerCache
	// The adapter's own credential, as the binary holds it: auth grants
	// leases (BMCIS_MCP_KEY_LEASE, on by default) only to it.
	h := newRealWithClient(b, nil, []realOpt{withServiceToken(stacktest.AdapterToken)}, []harnessOpt{func(o *tools.Options) {
		cache = o.AllowCache
		answers = o.Answers
		var err error
		rec, err = auditlog.New(o.Clients.Auth, auditlog.Config{QueryText: true})
		if err != nil {
			b.Fatal(err)
		}
		o.Audit = rec
		o.ValidateOutput = false
		o.Key = tools.APIKeyFromContext
		// The per-tool metrics, as the binary counts them.
		if o.Metrics, err = tools.NewMetrics(prometheus.NewRegistry()); err != nil {
			b.Fatal(err)
		}
	}})
	b.Cleanup(func() { rec.Close(context.Background()) })
	srv := httptest.NewServer(transport.HTTPHandler(h.srv, h.clients, slog.New(slog.DiscardHandler), 0, nil))
	b.Cleanup(srv.Close)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"incident severity levels","page_size":10}}}`)
	// A key with a group: its access set is larger than everyone's, the
	// common case of a company's keys (docs/ACCESS.md).
	grouped := h.stack.CreateKey(b, stacktest.Key{Name: "bench-grouped", Owner: "mcp-tests", Groups: []string{"bench"},
		PerMinute: 1_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	post := func(b *testing.B, key string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-API-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"status":"success"`)) {
			b.Fatalf("%d %v %s", resp.StatusCode, err, out)
		}
	}
	ctx := context.Background()
	for _, c := range []struct{ name, key string }{{"semantic_search", h.key}, {"semantic_search/scoped", grouped}} {
		b.Run(c.name, func(b *testing.B) {
			post(b, c.key)
			b.ResetTimer()
			cpu := processCPU(b)
			reads, writes := processSyscalls(b)
			early := cache.Stats()
			kept := answers.Stats()
			for i := 0; i < b.N; i++ {
				post(b, c.key)
			}
			// The share of calls the answer cache answered (0 with it off).
			b.ReportMetric(float64(answers.Stats().Hits-kept.Hits)/float64(b.N), "kept/op")
			// The share of calls whose search started before the check
			// answered and whose result was used (1 when the allow cache
			// serves every call).
			b.ReportMetric(float64(cache.Stats().Kept-early.Kept)/float64(b.N), "early/op")
			// The share of calls that spent a leased unit instead of
			// waiting for a check (issue 32's key leases).
			b.ReportMetric(float64(cache.Stats().Leased-early.Leased)/float64(b.N), "leased/op")
			// This process's CPU per call (the adapter, plus the small share of
			// the client): on a shared machine, steadier than the wall time,
			// which also waits for the services' CPU.
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			// Its read and write system calls per call (HTTP both ways, the two
			// gRPC calls, the audit trail's appends): each costs a few µs.
			reads2, writes2 := processSyscalls(b)
			b.ReportMetric(float64(reads2-reads)/float64(b.N), "reads/op")
			b.ReportMetric(float64(writes2-writes)/float64(b.N), "writes/op")
		})
	}
	b.Run("search", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, _, err := h.clients.SearchPage(ctx, "incident severity levels", 0, 10, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("auth.Check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := h.clients.Check(ctx, h.key, tools.ToolSemanticSearch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// processSyscalls is how many read and write system calls this process has
// made (/proc/self/io: syscr, syscw).
func processSyscalls(b *testing.B) (reads, writes int64) {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(value, 10, 64)
		switch name {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
