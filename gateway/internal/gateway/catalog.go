package gateway

// The MCP surface the product exposes through the MCP adapter: its tools,
// resource templates and the service behind each. The dashboard shows it in
// /api/health, /api/servers and /api/tools.

// Tool is one MCP tool.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
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

var responseMode = map[string]any{
	"type":        "string",
	"enum":        []string{"ids_only", "metadata", "preview", "full"},
	"default":     "metadata",
	"description": "How much of each result to return.",
}

// tools are the MCP adapter's tools.
var tools = []Tool{
	{
		Name: "semantic_search",
		Description: "Hybrid search over the knowledge base (BM25 keywords and vector similarity, " +
			"fused by reciprocal rank); returns ranked chunks at the chosen level of detail, with pagination.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query":         map[string]any{"type": "string", "minLength": 1, "maxLength": 500},
				"top_k":         map[string]any{"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
				"page_size":     map[string]any{"type": "integer", "minimum": 1, "maximum": 50},
				"cursor":        map[string]any{"type": "string"},
				"response_mode": responseMode,
			},
			"required": []string{"query"},
		},
		backend: Search, rpc: "Search",
	},
	{
		Name:        "get_chunks",
		Description: "Fetches whole chunks by id: the second step after a search that returned ids only.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"chunk_ids": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "minItems": 1, "maxItems": 100},
			},
			"required": []string{"chunk_ids"},
		},
		backend: Search, rpc: "GetChunks",
	},
	{
		Name: "find_vendor_info",
		Description: "Looks a vendor up in the knowledge graph: related entities, relationships and " +
			"statistics, with suggestions when the name is unknown or ambiguous.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"vendor_name":           map[string]any{"type": "string", "minLength": 1, "maxLength": 200},
				"response_mode":         responseMode,
				"include_relationships": map[string]any{"type": "boolean", "default": true},
			},
			"required": []string{"vendor_name"},
		},
		backend: VendorGraph, rpc: "GetVendor",
	},
}

// resourceTemplates are the MCP adapter's resource templates.
var resourceTemplates = []ResourceTemplate{
	{Name: "chunk", URITemplate: "kb://chunks/{chunk_id}", Description: "One chunk of a document, by id.", ContentType: "application/json", backend: Search},
	{Name: "vendor", URITemplate: "kb://vendors/{vendor_name}", Description: "A vendor's neighbourhood in the knowledge graph.", ContentType: "application/json", backend: VendorGraph},
}

// capabilitiesOf returns what a server exposes: the adapter everything, each
// service what it answers for.
func capabilitiesOf(server string) Capabilities {
	c := Capabilities{Tools: []Tool{}, Resources: []Resource{}, ResourceTemplates: []ResourceTemplate{}, Prompts: []Prompt{}}
	for _, t := range tools {
		if server == MCPAdapter || t.backend == server {
			c.Tools = append(c.Tools, t)
		}
	}
	for _, rt := range resourceTemplates {
		if server == MCPAdapter || rt.backend == server {
			c.ResourceTemplates = append(c.ResourceTemplates, rt)
		}
	}
	return c
}

// serverMeta describes one server entry.
type serverMeta struct {
	name, displayName, description, transport, grpcService string
}

var serverMetas = []serverMeta{
	{Search, "Search", "Hybrid retrieval over document chunks: BM25 and pgvector similarity fused with RRF; ingestion and result cache.", "grpc", grpcServiceNames[Search]},
	{VendorGraph, "Vendor graph", "Vendors, entities and relationships: lookup, statistics and suggestions.", "grpc", grpcServiceNames[VendorGraph]},
	{Auth, "Auth", "API keys and per-key rate limits (minute, hour, day).", "grpc", grpcServiceNames[Auth]},
	{MCPAdapter, "MCP adapter", "The MCP server Claude Desktop talks to; fans tool calls out to the services.", "streamable-http", ""},
}

func metaOf(name string) serverMeta {
	for _, m := range serverMetas {
		if m.name == name {
			return m
		}
	}
	return serverMeta{name: name, displayName: name}
}
