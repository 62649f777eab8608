package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// The REST gateway shows the adapter's MCP catalogue on its dashboard
// without importing mcp-go or this module: it embeds a JSON copy of the
// live tools/list and resources/templates/list answers. This test keeps
// that copy exact; after changing a tool, refresh it with
//
//	go test ./internal/tools -run TestGatewayCatalog -update-catalog
var updateCatalog = flag.Bool("update-catalog", false, "rewrite the gateway's copy of the MCP catalogue")

// gatewayCatalog is the gateway's embedded copy (gateway module).
var gatewayCatalog = filepath.Join("..", "..", "..", "gateway", "internal", "catalog", "mcp_catalog.json")

// catalog is the file's shape.
type catalog struct {
	Server            string                 `json:"server"`
	Tools             []mcp.Tool             `json:"tools"`
	ResourceTemplates []mcp.ResourceTemplate `json:"resourceTemplates"`
}

func TestGatewayCatalog(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tl, err := h.cli.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	rt, err := h.cli.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	live := catalog{Server: tools.ServerName, Tools: tl.Tools, ResourceTemplates: rt.ResourceTemplates}
	raw, err := json.Marshal(live)
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, json.Indent(&want, raw, "", "  "))
	want.WriteByte('\n')

	if *updateCatalog {
		require.NoError(t, os.WriteFile(gatewayCatalog, want.Bytes(), 0o644))
		return
	}
	got, err := os.ReadFile(gatewayCatalog)
	require.NoError(t, err, "the gateway's catalogue copy is missing: run go test ./internal/tools -run TestGatewayCatalog -update-catalog")
	require.JSONEq(t, want.String(), string(got),
		"%s differs from the adapter's live tools/list and resources/templates/list: run go test ./internal/tools -run TestGatewayCatalog -update-catalog", gatewayCatalog)
}
