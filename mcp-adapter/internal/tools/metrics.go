package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/platform/auditlog"
)

// Metric names the gateway's /api/stats reads per tool (docs/GATEWAY.md).
const (
	MetricToolCalls    = "bmcis_mcp_tool_calls_total"
	MetricToolHandling = "bmcis_mcp_tool_handling_seconds"
)

// outcomeError is a call's outcome when its handler failed without an
// envelope (an error result, a recovered panic).
const outcomeError = "ERROR"

// Metrics counts and times every tool call, per tool and outcome (the
// audit trail's: "ok" or the answer's error code).
type Metrics struct {
	calls    *prometheus.CounterVec
	handling *prometheus.HistogramVec
}

// NewMetrics registers the tool call metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricToolCalls,
			Help: "MCP tool calls answered, by tool and outcome (ok or the answer's error code).",
		}, []string{"tool", "outcome"}),
		// The services' RPC buckets (platform/grpcserver), so a tool's time
		// and the RPCs behind it read on the same scale.
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricToolHandling,
			Help:    "MCP tool call latency in the adapter, from the handler's start to its answer, by tool.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"tool"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.handling} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the tool call metrics: %w", err)
		}
	}
	return m, nil
}

// callOutcome is where a tool handler leaves its outcome (logDone) for the
// middleware around it.
type callOutcome struct{ code string }

type callOutcomeKey struct{}

// noteOutcome records the call's outcome for the metrics middleware, when
// one runs around the handler.
func noteOutcome(ctx context.Context, code string) {
	if o, ok := ctx.Value(callOutcomeKey{}).(*callOutcome); ok {
		o.code = code
	}
}

// middleware is the one place every tool call passes through for its
// metrics: the server installs it outermost, so a recovered panic counts too.
func (m *Metrics) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		o := &callOutcome{}
		res, err := next(context.WithValue(ctx, callOutcomeKey{}, o), req)
		code := o.code
		switch {
		case err != nil:
			code = outcomeError
		case code == "":
			code = outcomeOf(nil, res)
		}
		tool := req.Params.Name
		m.calls.WithLabelValues(tool, code).Inc()
		m.handling.WithLabelValues(tool).Observe(time.Since(start).Seconds())
		return res, err
	}
}

// outcomeOf is a finished call's outcome, for the audit trail and the
// metrics alike: the final envelope's error code, else "ERROR" for an error
// result without one, else auditlog.OK.
func outcomeOf(call *respond.Call, res *mcp.CallToolResult) string {
	if call != nil && call.Final != nil {
		if call.Final.Error != nil {
			return call.Final.Error.Code
		}
		return auditlog.OK
	}
	if res != nil && res.IsError {
		return outcomeError
	}
	return auditlog.OK
}
