package tools_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

type elicitor struct {
	action mcp.ElicitationResponseAction
	answer map[string]any
	asked  atomic.Int32
	last   atomic.Value // mcp.ElicitationRequest
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.asked.Add(1)
	e.last.Store(req)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: e.action, Content: e.answer}}, nil
}

func TestElicitation(t *testing.T) {
	protocols := map[string][]client.ClientOption{
		"modern": nil,
		"legacy": {client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)},
	}
	for name, extra := range protocols {
		t.Run(name+"/ambiguous vendor accepted", func(t *testing.T) {
			el := &elicitor{action: mcp.ElicitationResponseActionAccept, answer: map[string]any{"vendor_name": "Acme Corp"}}
			h := newRealWithClient(t, append([]client.ClientOption{client.WithElicitationHandler(el)}, extra...), nil, nil)
			a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Acme"})
			require.Equal(t, int32(1), el.asked.Load())
			req := el.last.Load().(mcp.ElicitationRequest)
			prop := req.Params.RequestedSchema.(map[string]any)["properties"].(map[string]any)["vendor_name"].(map[string]any)
			require.ElementsMatch(t, []any{"Acme Corp", "ACME Inc", "Acme Ltd"}, toAnyList(prop["enum"]), "the candidates come from the vendorgraph")
			require.Equal(t, "success", a.status())
			require.Equal(t, "Acme Corp", a.results()[0]["vendor_name"])
			require.Contains(t, a.warningCodes(), "RESOLVED_BY_ELICITATION")
		})
		t.Run(name+"/not found declined", func(t *testing.T) {
			el := &elicitor{action: mcp.ElicitationResponseActionDecline}
			h := newRealWithClient(t, append([]client.ClientOption{client.WithElicitationHandler(el)}, extra...), nil, nil)
			a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globx"})
			require.Equal(t, int32(1), el.asked.Load())
			require.Equal(t, "VENDOR_NOT_FOUND", a.errCode())
			require.Equal(t, "needsInput:v1", a.env["needs_input"].(map[string]any)["kind"])
		})
		t.Run(name+"/empty query answered", func(t *testing.T) {
			el := &elicitor{action: mcp.ElicitationResponseActionAccept, answer: map[string]any{"query": "incident severity levels"}}
			h := newRealWithClient(t, append([]client.ClientOption{client.WithElicitationHandler(el)}, extra...), nil, nil)
			a := h.call(tools.ToolSemanticSearch, map[string]any{"query": ""})
			require.Equal(t, int32(1), el.asked.Load())
			require.Equal(t, "success", a.status())
			require.NotEmpty(t, a.results())
		})
	}
}

func toAnyList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	return nil
}
