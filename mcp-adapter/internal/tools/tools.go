// Package tools is the MCP server: the semantic_search, find_vendor_info
// and get_chunks tools and the kb:// resource templates, each call checked
// with the auth service before anything is returned.
package tools

import (
	"context"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// Tool names.
const (
	ToolSemanticSearch = "semantic_search"
	ToolFindVendorInfo = "find_vendor_info"
	ToolGetChunks      = "get_chunks"
)

// ServerName is the MCP server name clients show.
const ServerName = "bmcis-knowledge"

// KeySource returns the API key of the call in ctx ("" when none).
type KeySource func(ctx context.Context) string

// Options configure the server.
type Options struct {
	Clients *backend.Clients
	// Key returns the caller's API key.
	Key KeySource
	// KeyHint tells a caller without a key how to supply one.
	KeyHint             string
	Cursors             *cursor.Codec
	Thresholds          warnings.Thresholds
	DefaultResponseMode projection.Mode
	// Desktop enables the desktop signals (ENABLE_DESKTOP_ENHANCEMENTS).
	Desktop bool
	Signals signals.Config
	// AllowCache remembers keys auth allowed a moment ago, whose calls may
	// then start while they are checked; nil waits for every check.
	AllowCache *allowcache.Cache
	// ValidateOutput checks structured answers against the output schemas.
	ValidateOutput bool
	Logger         *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Server holds the tool handlers.
type Server struct {
	opts    Options
	resp    *respond.Responder
	clients *backend.Clients
	log     *slog.Logger
}

// New builds the MCP server with its tools and resource templates.
func New(opts Options) *server.MCPServer {
	s := newServer(opts)
	srvOpts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithElicitation(),
		server.WithRecovery(),
		server.WithInstructions(instructions),
	}
	if opts.ValidateOutput {
		srvOpts = append(srvOpts, server.WithOutputSchemaValidation())
	}
	m := server.NewMCPServer(ServerName, version.Version, srvOpts...)
	m.AddTool(searchTool(), s.semanticSearch)
	m.AddTool(vendorTool(), s.findVendorInfo)
	m.AddTool(chunksTool(), s.getChunks)
	m.AddResourceTemplate(chunkTemplate(), s.readChunk)
	m.AddResourceTemplate(vendorTemplate(), s.readVendor)
	return m
}

// Catalog is the server's tools and resource templates without their
// handlers: the bridge (stdio to a remote endpoint) lists these and
// forwards the calls.
func Catalog() ([]mcp.Tool, []mcp.ResourceTemplate) {
	return []mcp.Tool{searchTool(), vendorTool(), chunksTool()},
		[]mcp.ResourceTemplate{chunkTemplate(), vendorTemplate()}
}

// Instructions are the server's instructions to the model.
func Instructions() string { return instructions }

func newServer(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Signals.Now == nil {
		opts.Signals.Now = opts.Now
	}
	if opts.DefaultResponseMode == "" {
		opts.DefaultResponseMode = projection.Metadata
	}
	if opts.Key == nil {
		opts.Key = func(context.Context) string { return "" }
	}
	return &Server{
		opts:    opts,
		resp:    &respond.Responder{Thresholds: opts.Thresholds},
		clients: opts.Clients,
		log:     opts.Logger,
	}
}

const instructions = `BMCIS Knowledge: search the company knowledge base and the vendor graph.
Work progressively to save context: semantic_search with response_mode "ids_only" or "metadata" (the default) to find candidates, page with the returned cursor, then get_chunks with the few chunk ids worth reading in full. Use find_vendor_info for a named vendor's entities and relationships. Every answer is a JSON envelope; read _metadata.status, warnings and error.`

func readOnly(title string) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(true),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	})
}

func modeNames() []string {
	out := make([]string, len(projection.Modes))
	for i, m := range projection.Modes {
		out[i] = string(m)
	}
	return out
}

func formatOption() mcp.ToolOption {
	return mcp.WithString("format",
		mcp.Enum(string(render.JSON), string(render.Markdown), string(render.Both)),
		mcp.DefaultString(string(render.JSON)),
		mcp.Description(`Content blocks: "json" (default) is the envelope as one JSON text block; "markdown" a readable rendering; "both" the markdown then the JSON block. structuredContent always carries the envelope.`))
}

func searchTool() mcp.Tool {
	return mcp.NewTool(ToolSemanticSearch,
		mcp.WithDescription("Use this first whenever you need information from the BMCIS knowledge base: it finds the document passages (chunks) most relevant to a natural-language question or keywords. "+
			"Hybrid retrieval (BM25 keywords + vector similarity, fused by rank). "+
			"Control the size of the answer with response_mode: ids_only (~10 tokens/result), metadata (default: file, category, position, score), preview (adds a 200-character snippet and section header) or full (whole text and all scores). "+
			"Page with page_size (1-50, default 10) and the cursor of the previous answer; then read chosen chunks in full with get_chunks."),
		readOnly("Search the knowledge base"),
		mcp.WithString("query", mcp.Required(), mcp.MaxLength(500),
			mcp.Description("What to look for: a question or keywords, up to 500 characters.")),
		mcp.WithInteger("page_size", mcp.Min(1), mcp.Max(50), mcp.DefaultNumber(10),
			mcp.Description("Results per page, 1-50 (default 10).")),
		mcp.WithInteger("top_k", mcp.Min(1), mcp.Max(50),
			mcp.Description("Deprecated: use page_size. Ignored when page_size is also given.")),
		mcp.WithString("cursor",
			mcp.Description("The pagination.cursor of the previous answer, to get the next page of the same query. Omit for the first page.")),
		mcp.WithString("response_mode", mcp.Enum(modeNames()...), mcp.DefaultString(string(projection.Metadata)),
			mcp.Description("Detail per result: ids_only, metadata (default), preview or full. With a cursor, defaults to the cursor's mode.")),
		mcp.WithArray("fields", mcp.WithStringEnumItems(projection.AllSearchFields()),
			mcp.Description("Only these result fields (each must belong to the response_mode). Omitting it returns every field of the mode plus the confidence, ranking and deduplication signals.")),
		formatOption(),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolSemanticSearch)),
	)
}

func vendorTool() mcp.Tool {
	return mcp.NewTool(ToolFindVendorInfo,
		mcp.WithDescription("Use this when you know a vendor's name and need what the vendor knowledge graph holds about it: related entities (products, people, organizations), relationships and statistics. "+
			"Names are matched ignoring case and punctuation; an ambiguous or unknown name answers with the candidates to choose from (use semantic_search to discover vendor names). "+
			"response_mode: ids_only (entity and relationship ids), metadata (default: statistics and top entities), preview (5 entities and 5 relationships) or full (up to 100 entities and 500 relationships)."),
		readOnly("Look up a vendor"),
		mcp.WithString("vendor_name", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(200),
			mcp.Description("The vendor's name or alias, 1-200 characters.")),
		mcp.WithString("response_mode", mcp.Enum(modeNames()...), mcp.DefaultString(string(projection.Metadata)),
			mcp.Description("Detail level: ids_only, metadata (default), preview or full.")),
		mcp.WithBoolean("include_relationships", mcp.DefaultBool(true),
			mcp.Description("Whether to return relationships (default true).")),
		formatOption(),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolFindVendorInfo)),
	)
}

func chunksTool() mcp.Tool {
	return mcp.NewTool(ToolGetChunks,
		mcp.WithDescription("Use this after semantic_search to read specific chunks by id, typically in full, once ids_only or metadata results have shown which ones matter: the last step of the progressive workflow. "+
			"Returns the chunks in the order asked; ids that do not exist are reported in a warning. "+
			"response_mode: ids_only, metadata, preview or full (default)."),
		readOnly("Read chunks by id"),
		mcp.WithArray("chunk_ids", mcp.Required(), mcp.WithIntegerItems(), mcp.MinItems(1), mcp.MaxItems(100),
			mcp.Description("1-100 chunk ids from semantic_search results.")),
		mcp.WithString("response_mode", mcp.Enum(modeNames()...), mcp.DefaultString(string(projection.Full)),
			mcp.Description("Detail per chunk: ids_only, metadata, preview or full (default).")),
		mcp.WithArray("fields", mcp.WithStringEnumItems(projection.AllChunkFields()),
			mcp.Description("Only these fields (each must belong to the response_mode).")),
		formatOption(),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolGetChunks)),
	)
}

// newCall starts answering a call: a request id shared by the envelope and
// the backend calls, the start time, and the output format.
func (s *Server) newCall(ctx context.Context, op string, format render.Format) (context.Context, *respond.Call) {
	id := logging.NewRequestID()
	ctx = logging.WithRequestID(ctx, id)
	return ctx, &respond.Call{
		Operation: op,
		RequestID: id,
		Started:   s.opts.Now(),
		Format:    format,
		View:      render.View{Tool: op},
	}
}

// authInfo is what an allowed auth check tells the answer.
type authInfo struct {
	degraded bool
}

// guarded runs the auth check, then the backend call (nil for none): no
// backend work starts for a key auth has not allowed. A key this replica
// allowed for op a moment ago (Options.AllowCache) may start its call while
// the check runs; a denial still cancels it and nothing from it is used.
func guarded[T any](ctx context.Context, s *Server, op string, call func(context.Context) (T, error)) (T, authInfo, *apierr.Error, error) {
	var zero T
	key := s.opts.Key(ctx)
	if key == "" {
		return zero, authInfo{}, apierr.NewAuthRequired(s.opts.KeyHint), nil
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	early := call != nil && s.opts.AllowCache.Take(key, op)
	if early {
		go func() {
			v, err := call(bctx)
			ch <- result{v, err}
		}()
	}
	resp, err := s.clients.Check(ctx, key, op)
	if err != nil {
		cancel()
		s.opts.AllowCache.Forget(key, op)
		e := apierr.FromBackend(apierr.Auth, err)
		if e.Code != apierr.ServiceUnavailable {
			e = apierr.NewServiceUnavailable("auth", "the key could not be checked", true)
		}
		return zero, authInfo{}, e, nil
	}
	if !resp.GetAllowed() {
		cancel()
		s.opts.AllowCache.Forget(key, op)
		return zero, authInfo{}, s.denial(resp), nil
	}
	if resp.GetLimiterDegraded() {
		s.opts.AllowCache.Forget(key, op) // remaining units unknown
	} else {
		rem := resp.GetRemaining()
		s.opts.AllowCache.Allowed(key, op, min(rem.GetMinute(), rem.GetHour(), rem.GetDay()))
	}
	info := authInfo{degraded: resp.GetLimiterDegraded()}
	switch {
	case call == nil:
		return zero, info, nil, nil
	case early:
		r := <-ch
		return r.v, info, nil, r.err
	}
	v, err := call(ctx)
	return v, info, nil, err
}

func (s *Server) denial(resp *authv1.CheckResponse) *apierr.Error {
	switch resp.GetDenialReason() {
	case authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED:
		return apierr.NewAuthRequired(s.opts.KeyHint)
	case authv1.DenialReason_DENIAL_REASON_RATE_LIMIT:
		rem := resp.GetRemaining()
		return apierr.NewRateLimit(envelope.Remaining{
			Minute: rem.GetMinute(), Hour: rem.GetHour(), Day: rem.GetDay(),
		}, int(resp.GetResetInSeconds()))
	case authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED:
		return apierr.NewAuthInvalid("AUTH_EXPIRED", resp.GetMessage())
	case authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED:
		return apierr.NewAuthInvalid("AUTH_REVOKED", resp.GetMessage())
	}
	return apierr.NewAuthInvalid("AUTH_INVALID", resp.GetMessage())
}

// logDone records a finished call.
func (s *Server) logDone(ctx context.Context, call *respond.Call, res *mcp.CallToolResult) {
	status := "success"
	if res != nil && res.IsError {
		status = "error"
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "tool call",
		slog.String("tool", call.Operation),
		slog.String("request_id", call.RequestID),
		slog.String("status", status),
		slog.Float64("ms", float64(s.opts.Now().Sub(call.Started).Microseconds())/1000))
}

type apiKeyCtx struct{}

// WithAPIKey stores the caller's API key in ctx (the HTTP transport does
// this per request).
func WithAPIKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, apiKeyCtx{}, key)
}

// APIKeyFromContext returns the key WithAPIKey stored, or "".
func APIKeyFromContext(ctx context.Context) string {
	k, _ := ctx.Value(apiKeyCtx{}).(string)
	return k
}
