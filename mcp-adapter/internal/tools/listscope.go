package tools

import (
	"context"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
)

// OpToolsList is the operation a tools/list check names to auth. It is no
// tool name, so no key is ever scoped to it.
const OpToolsList = "tools/list"

// toolNames are every tool the server has, in the order it lists them.
var toolNames = []string{ToolSemanticSearch, ToolFindVendorInfo, ToolGetChunks}

// listScopeOps are the allow cache's operations whose remembered allow
// tells a list the key's scope: any tool's, then an earlier list's.
var listScopeOps = append(slices.Clone(toolNames), OpToolsList)

// ListScope says which tools the caller in ctx may call: nil for all of
// them (also for a caller without a credential: the catalog is public and
// each call then answers AUTH_REQUIRED with how to supply a key), or the
// typed error a tool call would get when that cannot be known (the caller
// then gets no list at all: fail closed).
type ListScope func(ctx context.Context) (allowed []string, e *apierr.Error)

// NewListScope returns the ListScope of a server built with opts (New).
func NewListScope(opts Options) ListScope { return newServer(opts).listScope }

// listScope reads the caller's tool scope. Cost, decided once: a check the
// allow cache still remembers for any tool of the key, or for an earlier
// list, answers without asking auth; otherwise one auth.Check names
// OpToolsList as its tool, which auth refuses for a key limited to tools
// before its rate limiter (free of charge, and the refusal names the key's
// tools: auth's contract, CheckRequest.tool), and charges an unscoped key
// one rate-limit unit like any request, once per allow cache TTL. No new
// auth RPC is needed.
func (s *Server) listScope(ctx context.Context) ([]string, *apierr.Error) {
	key := s.opts.Key(ctx)
	if key == "" {
		return nil, nil
	}
	if sc, ok := s.opts.AllowCache.Remembered(key, listScopeOps); ok {
		return sc.Tools, nil
	}
	resp, err := s.clients.Check(ctx, key, OpToolsList)
	if err != nil {
		return nil, authUnreachable(err)
	}
	tools := resp.GetScopes().GetTools()
	switch {
	case resp.GetAllowed():
		if !resp.GetLimiterDegraded() { // units unknown: not remembered, as for a call
			// Only lists read it (Remembered): a call takes early starts and
			// lease units under its tool's name, never OpToolsList
			// (guarded), and a refused call forgets it.
			s.opts.AllowCache.Allowed(key, OpToolsList, leastRemaining(resp.GetRemaining()), checkScope(resp))
		}
		return tools, nil
	case resp.GetDenialReason() == authv1.DenialReason_DENIAL_REASON_TOOL_NOT_ALLOWED && len(tools) > 0:
		return tools, nil
	}
	// A TOOL_NOT_ALLOWED naming no tools (an auth that does not say the
	// scope) lists nothing it cannot vouch for: fail closed.
	return nil, s.denial(resp, OpToolsList)
}

// authUnreachable is the answer to a check that failed (auth down, timed
// out): retryable, the same for a call and a tools/list.
func authUnreachable(err error) *apierr.Error {
	e := apierr.FromBackend(apierr.Auth, err)
	if e.Code != apierr.ServiceUnavailable {
		e = apierr.NewServiceUnavailable("auth", "the key could not be checked", true)
	}
	return e
}

type listedToolsCtx struct{}

// WithListedTools marks ctx as a tools/list (or resources/templates/list)
// request whose caller may call only allowed (nil: every tool). The HTTP
// transport sets it after ListScope; a context without it lists everything.
func WithListedTools(ctx context.Context, allowed []string) context.Context {
	return context.WithValue(ctx, listedToolsCtx{}, allowed)
}

// listedTools is the tool scope WithListedTools put in ctx; false when none
// or all tools.
func listedTools(ctx context.Context) ([]string, bool) {
	allowed, _ := ctx.Value(listedToolsCtx{}).([]string)
	return allowed, len(allowed) > 0
}

// filterListedTools keeps the tools the request's caller may call. mcp-go
// also runs it before each tools/call; such a context carries no scope, so
// the call reaches its handler, whose check answers TOOL_NOT_ALLOWED with
// the allowed tools, as before. Unfiltered, the list is returned as it
// came: a caller with every tool sees exactly the list it saw before.
func filterListedTools(ctx context.Context, list []mcp.Tool) []mcp.Tool {
	allowed, ok := listedTools(ctx)
	if !ok {
		return list
	}
	out := make([]mcp.Tool, 0, len(allowed))
	for _, t := range list {
		if slices.Contains(allowed, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// filterListedTemplates drops, from a resources/templates/list answer, the
// templates whose reads the caller's tool scope refuses (accessRules: a
// resource is checked as its tool).
func filterListedTemplates(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
	allowed, ok := listedTools(ctx)
	if !ok || res == nil {
		return
	}
	res.ResourceTemplates = slices.DeleteFunc(slices.Clone(res.ResourceTemplates), func(t mcp.ResourceTemplate) bool {
		tool, _ := AccessRule(t.URITemplate.Raw())
		return !slices.Contains(allowed, tool)
	})
}

// listFilters are the server options that apply WithListedTools.
func listFilters() []server.ServerOption {
	hooks := &server.Hooks{}
	hooks.AddAfterListResourceTemplates(filterListedTemplates)
	return []server.ServerOption{server.WithToolFilter(filterListedTools), server.WithHooks(hooks)}
}
