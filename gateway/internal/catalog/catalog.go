// Package catalog is the MCP surface the product exposes through the MCP
// adapter (its tools, resource templates and the service behind each) and
// the servers the dashboard shows.
package catalog

// The MCP surface the product exposes through the MCP adapter: its tools,
// resource templates and the service behind each. The dashboard shows it in
// /api/health, /api/servers and /api/tools.
//
// The tools and resource templates are not written here: mcp_catalog.json is
// a copy of the adapter's live tools/list and resources/templates/list
// answers, kept exact by TestGatewayCatalog in the mcp-adapter module
// (refresh it with `go test ./internal/tools -run TestGatewayCatalog
// -update-catalog` there). Only which service answers each one is the
// gateway's own knowledge (toolBackends, templateBackends).

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bmcis/knowledge/gateway/internal/backends"
)

// Tool is one MCP tool.
type Tool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Annotations map[string]any `json:"annotations,omitempty"`
	// backend is the service whose RPC answers the tool.
	backend string
	// rpc is that service's method.
	rpc string
}

// Resource is a fixed MCP resource (the product has none today).
type Resource struct {
	Name        string `json:"name"`
	URI         string `json:"uri"`
	Description string `json:"description"`
	ContentType string `json:"contentType"`
}

// ResourceTemplate is a parameterised MCP resource.
type ResourceTemplate struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	URITemplate string `json:"uriTemplate"`
	Description string `json:"description"`
	ContentType string `json:"contentType"`
	backend     string
}

// Prompt is an MCP prompt (the product has none today).
type Prompt struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Arguments   []any  `json:"arguments"`
}

// Capabilities is what one server entry exposes.
type Capabilities struct {
	Tools             []Tool             `json:"tools"`
	Resources         []Resource         `json:"resources"`
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates"`
	Prompts           []Prompt           `json:"prompts"`
}

//go:embed mcp_catalog.json
var mcpCatalogJSON []byte

// Backend is the service whose RPC answers the tool.
func (t Tool) Backend() string { return t.backend }

// RPC is the method of Backend that answers the tool.
func (t Tool) RPC() string { return t.rpc }

// toolBackends names the service and RPC behind each adapter tool, in the
// order the dashboard lists them (the progressive workflow's).
var toolBackends = []struct{ name, backend, rpc string }{
	{"semantic_search", backends.Search, "Search"},
	{"get_chunks", backends.Search, "GetChunks"},
	{"find_vendor_info", backends.VendorGraph, "GetVendor"},
}

// templateBackends names the service behind each resource template.
var templateBackends = map[string]string{
	"chunk":  backends.Search,
	"vendor": backends.VendorGraph,
}

// tools and resourceTemplates are the MCP adapter's, from mcp_catalog.json.
var tools, resourceTemplates = mustParseCatalog(mcpCatalogJSON)

// Tools lists the adapter's tools in the dashboard's order.
func Tools() []Tool { return tools }

// catalogTool is a tool of mcp_catalog.json (outputSchema is left out: the
// dashboard does not show it).
type catalogTool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Annotations map[string]any `json:"annotations"`
}

// parseCatalog reads the adapter's catalogue. Every tool and template must
// have a backend: a new adapter tool fails the gateway's tests until it is
// given one.
func parseCatalog(raw []byte) ([]Tool, []ResourceTemplate, error) {
	var c struct {
		Tools             []catalogTool `json:"tools"`
		ResourceTemplates []struct {
			Name        string `json:"name"`
			Title       string `json:"title"`
			URITemplate string `json:"uriTemplate"`
			Description string `json:"description"`
			MIMEType    string `json:"mimeType"`
		} `json:"resourceTemplates"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("mcp_catalog.json: %w", err)
	}
	if len(c.Tools) == 0 {
		return nil, nil, fmt.Errorf("mcp_catalog.json: no tools")
	}
	ts := make([]Tool, 0, len(c.Tools))
	for _, b := range toolBackends {
		i := slices.IndexFunc(c.Tools, func(t catalogTool) bool { return t.Name == b.name })
		if i < 0 {
			return nil, nil, fmt.Errorf("mcp_catalog.json: no tool %q (remove it from toolBackends)", b.name)
		}
		t := c.Tools[i]
		if t.InputSchema == nil {
			return nil, nil, fmt.Errorf("mcp_catalog.json: tool %q has no inputSchema", t.Name)
		}
		ts = append(ts, Tool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, Annotations: t.Annotations,
			backend: b.backend, rpc: b.rpc,
		})
	}
	if len(ts) != len(c.Tools) {
		for _, t := range c.Tools {
			if !slices.ContainsFunc(ts, func(x Tool) bool { return x.Name == t.Name }) {
				return nil, nil, fmt.Errorf("mcp_catalog.json: tool %q has no backend in toolBackends", t.Name)
			}
		}
		return nil, nil, fmt.Errorf("mcp_catalog.json: a tool is listed twice")
	}
	rts := make([]ResourceTemplate, 0, len(c.ResourceTemplates))
	for _, rt := range c.ResourceTemplates {
		b, ok := templateBackends[rt.Name]
		if !ok {
			return nil, nil, fmt.Errorf("mcp_catalog.json: resource template %q has no backend in templateBackends", rt.Name)
		}
		rts = append(rts, ResourceTemplate{
			Name: rt.Name, Title: rt.Title, URITemplate: rt.URITemplate, Description: rt.Description,
			ContentType: rt.MIMEType, backend: b,
		})
	}
	return ts, rts, nil
}

func mustParseCatalog(raw []byte) ([]Tool, []ResourceTemplate) {
	ts, rts, err := parseCatalog(raw)
	if err != nil {
		panic(err)
	}
	return ts, rts
}

// CapabilitiesOf returns what a server exposes: the adapter everything, each
// service what it answers for.
func CapabilitiesOf(server string) Capabilities {
	c := Capabilities{Tools: []Tool{}, Resources: []Resource{}, ResourceTemplates: []ResourceTemplate{}, Prompts: []Prompt{}}
	for _, t := range tools {
		if server == backends.MCPAdapter || t.backend == server {
			c.Tools = append(c.Tools, t)
		}
	}
	for _, rt := range resourceTemplates {
		if server == backends.MCPAdapter || rt.backend == server {
			c.ResourceTemplates = append(c.ResourceTemplates, rt)
		}
	}
	return c
}

// Server describes one server entry of /api/health.
type Server struct {
	Name, DisplayName, Description, Transport string
}

// Servers are the entries of /api/health, in its order.
var Servers = []Server{
	{backends.Search, "Search", "Hybrid retrieval over document chunks: BM25 and vector similarity fused into one ranking; ingestion, sources and result cache.", "grpc"},
	{backends.VendorGraph, "Vendor graph", "Vendors, entities and relationships: lookup, statistics and suggestions.", "grpc"},
	{backends.Auth, "Auth", "API keys, their per-key rate limits, and the audit trail of reads.", "grpc"},
	{backends.MCPAdapter, "MCP adapter", "The MCP server Claude Desktop talks to; fans tool calls out to the services.", "streamable-http"},
}

// ServerNamed returns the entry of the named server.
func ServerNamed(name string) Server {
	for _, m := range Servers {
		if m.Name == name {
			return m
		}
	}
	return Server{Name: name, DisplayName: name}
}
