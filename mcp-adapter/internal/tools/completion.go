package tools

import (
	"context"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"
)

// maxCompletions is how many vendor names a completion offers.
const maxCompletions = 10

// Completes reports whether a vendor_name completion is asked for: the
// argument of the research_vendor prompt or of the kb://vendors/{name}
// template. (MCP completes prompt and resource-template arguments only;
// these two feed find_vendor_info's vendor_name.)
func Completes(ref any, arg mcp.CompleteArgument) bool {
	if arg.Name != "vendor_name" {
		return false
	}
	switch r := ref.(type) {
	case mcp.PromptReference:
		return r.Name == PromptResearchVendor
	case mcp.ResourceReference:
		return r.URI == VendorURITemplate
	}
	return false
}

// vendorCompletions completes vendor names from the vendor graph's
// suggestions, for a key allowed to call find_vendor_info.
type vendorCompletions struct{ s *Server }

func (v vendorCompletions) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return v.complete(ctx, mcp.PromptReference{Type: "ref/prompt", Name: name}, arg), nil
}

func (v vendorCompletions) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return v.complete(ctx, mcp.ResourceReference{Type: "ref/resource", URI: uri}, arg), nil
}

// complete answers with no values rather than an error when the key is
// refused or the graph cannot be read: completion is a typing aid, and a
// refused key learns nothing from an empty list.
func (v vendorCompletions) complete(ctx context.Context, ref any, arg mcp.CompleteArgument) *mcp.Completion {
	out := &mcp.Completion{Values: []string{}}
	if !Completes(ref, arg) {
		return out
	}
	names, _, denied, err := guarded(ctx, v.s, ToolFindVendorInfo, func(ctx context.Context) ([]string, error) {
		return v.s.clients.SuggestVendors(ctx, arg.Value, maxCompletions)
	})
	switch {
	case denied != nil:
		v.s.log.DebugContext(ctx, "vendor completion refused", slog.String("code", string(denied.Code)))
	case err != nil:
		v.s.log.WarnContext(ctx, "vendor completion failed", slog.String("error", err.Error()))
	default:
		out.Values = names
	}
	return out
}
