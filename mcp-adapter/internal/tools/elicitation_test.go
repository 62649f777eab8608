package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/platform/limits"
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

// answered calls find_vendor_info carrying an elicitation answer the client
// made up itself, as any client of the stateless transport may: the answer
// must stay inside the key's scope and among the candidates offered.
func answered(h *harness, args map[string]any, answer string) answer {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := mcp.CallToolParams{Name: tools.ToolFindVendorInfo, Arguments: args}
	params.InputResponses = mcp.InputResponses{"bmcis_vendor_name": mcp.NewElicitationInputResponse(mcp.ElicitationResult{
		ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"vendor_name": answer}},
	})}
	// Straight to the transport: the SDK client fills inputResponses only
	// with answers to questions the server asked.
	resp, err := h.cli.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(9000)), Method: string(mcp.MethodToolsCall), Params: params,
	})
	require.NoError(h.t, err)
	require.Nil(h.t, resp.Error)
	raw := json.RawMessage(resp.Result)
	res, err := mcp.ParseCallToolResult(&raw)
	require.NoError(h.t, err)
	return h.decode(tools.ToolFindVendorInfo, res)
}

// evidenceIDs are the evidence chunk ids of an ids_only vendor answer.
func evidenceIDs(a answer) []any {
	ids, _ := a.results()[0]["evidence_chunk_ids"].([]any)
	return ids
}

// TestElicitedVendorAnswer: the vendor named in an elicitation answer is
// read with the key's category scope, like a vendor_name, and only a
// candidate the question offered is accepted.
func TestElicitedVendorAnswer(t *testing.T) {
	open := newReal(t)
	key := scopedKey(t, "no-categories", stacktest.Key{Categories: []string{"zz-nothing"}})
	h := newRealWithClient(t, nil, nil, []harnessOpt{withKey(key)})
	ambiguous := map[string]any{"vendor_name": "Acme", "response_mode": "ids_only"}

	a := answered(open, ambiguous, "Acme Corp")
	require.Equal(t, "success", a.status(), "%v", a.env["error"])
	require.NotEmpty(t, evidenceIDs(a), "an unscoped key sees the evidence")

	direct := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Acme Corp", "response_mode": "ids_only"})
	require.Equal(t, "success", direct.status())
	require.Empty(t, evidenceIDs(direct), "no evidence in the key's categories")

	a = answered(h, ambiguous, "Acme Corp")
	require.Equal(t, "success", a.status(), "%v", a.env["error"])
	require.Equal(t, "Acme Corp", a.results()[0]["vendor_name"])
	require.Empty(t, evidenceIDs(a), "the answered name is read inside the key's categories")

	a = answered(h, ambiguous, "acme corp")
	require.Equal(t, "success", a.status(), "a candidate in other case is that candidate: %v", a.env["error"])
	require.Equal(t, "Acme Corp", a.results()[0]["vendor_name"])

	for name, bad := range map[string]string{
		"not offered": "Megacorp Holdings",
		"too long":    strings.Repeat("a", limits.VendorName.Max+1),
	} {
		t.Run(name, func(t *testing.T) {
			a := answered(h, ambiguous, bad)
			require.Equal(t, "INVALID_PARAMS", a.errCode())
			require.Equal(t, "vendor_name", a.errObj()["details"].(map[string]any)["parameter"])
			require.NotContains(t, a.blocks[0], "Megacorp Product", "nothing of the other vendor is read")
		})
	}
	t.Run("not offered names the candidates", func(t *testing.T) {
		a := answered(h, ambiguous, "Megacorp Holdings")
		require.Contains(t, a.errObj()["message"], "Acme Corp")
	})
}
