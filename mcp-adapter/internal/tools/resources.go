package tools

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/platform/limits"
)

// Resource URI templates.
const (
	ChunkURITemplate  = "kb://chunks/{chunk_id}"
	VendorURITemplate = "kb://vendors/{vendor_name}"
)

// accessRules name, for every tool and resource template the server
// registers, the tool its auth check names: the key's tool scope allows or
// refuses it, and its category scope and access set then bound every read
// (guarded). A resource reads what its tool reads, under the same rule.
// TestEveryToolAndResourceHasAnAccessRule fails on one registered without
// a rule here.
var accessRules = map[string]string{
	ToolSemanticSearch: ToolSemanticSearch,
	ToolGetChunks:      ToolGetChunks,
	ToolFindVendorInfo: ToolFindVendorInfo,
	ChunkURITemplate:   ToolGetChunks,
	VendorURITemplate:  ToolFindVendorInfo,
}

// AccessRule is the tool the auth check names for a tool or resource
// template (its URI template), and whether it has a rule.
func AccessRule(name string) (string, bool) {
	tool, ok := accessRules[name]
	return tool, ok
}

// AccessRules lists the tools and resource templates with a rule.
func AccessRules() []string { return slices.Sorted(maps.Keys(accessRules)) }

func chunkTemplate() mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(ChunkURITemplate, "chunk",
		mcp.WithTemplateTitle("Knowledge base chunk"),
		mcp.WithTemplateDescription("One chunk of a knowledge-base document by id, in full: a markdown rendering, then the get_chunks envelope as JSON."),
		mcp.WithTemplateMIMEType("text/markdown"))
}

func vendorTemplate() mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(VendorURITemplate, "vendor",
		mcp.WithTemplateTitle("Vendor"),
		mcp.WithTemplateDescription("A vendor's neighbourhood in the vendor graph (find_vendor_info, full mode): a markdown rendering, then the envelope as JSON. URL-encode the name."),
		mcp.WithTemplateMIMEType("text/markdown"))
}

func templateArg(req mcp.ReadResourceRequest, name string) string {
	var v string
	switch x := req.Params.Arguments[name].(type) {
	case []string:
		if len(x) > 0 {
			v = x[0]
		}
	case string:
		v = x
	}
	if u, err := url.PathUnescape(v); err == nil {
		v = u
	}
	return strings.TrimSpace(v)
}

func (s *Server) readChunk(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	p := chunksParams{mode: projection.Full, format: render.Both}
	var perr *apierr.Error
	id, err := strconv.ParseInt(templateArg(req, "chunk_id"), 10, 64)
	if err != nil || id <= 0 {
		perr = apierr.NewInvalidParams("chunk_id", "must be a positive integer", "Use a chunk_id from semantic_search results, e.g. kb://chunks/12345.")
	} else {
		p.ids = []int64{id}
	}
	ctx, call := s.newCall(ctx, accessRules[ChunkURITemplate], p.format)
	noteResource(ctx, req.Params.URI)
	res := s.chunks(ctx, call, p, perr)
	s.logDone(ctx, call, res)
	return ResourceContents(req.Params.URI, res), nil
}

func (s *Server) readVendor(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	p := vendorParams{name: templateArg(req, "vendor_name"), mode: projection.Full, relationships: true, format: render.Both}
	var perr *apierr.Error
	if n := len([]rune(p.name)); !limits.VendorName.Allows(n) {
		perr = apierr.NewInvalidParams("vendor_name", vendorNameRule(), "Use kb://vendors/{vendor_name} with a URL-encoded name.")
	}
	ctx, call := s.newCall(ctx, accessRules[VendorURITemplate], p.format)
	noteResource(ctx, req.Params.URI)
	noteOf(ctx).query = p.name
	res := s.vendor(ctx, mcp.CallToolRequest{}, call, p, perr, false)
	s.logDone(ctx, call, res)
	return ResourceContents(req.Params.URI, res), nil
}

// ResourceContents turns a format "both" answer into resource contents:
// the markdown, then the envelope JSON.
func ResourceContents(uri string, res *mcp.CallToolResult) []mcp.ResourceContents {
	out := make([]mcp.ResourceContents, 0, 2)
	mimes := []string{"text/markdown", "application/json"}
	if len(res.Content) == 1 {
		mimes = mimes[1:]
	}
	for i, c := range res.Content {
		t, ok := c.(mcp.TextContent)
		if !ok || i >= len(mimes) {
			continue
		}
		out = append(out, mcp.TextResourceContents{URI: uri, MIMEType: mimes[i], Text: t.Text})
	}
	return out
}
