// Package tools is the MCP server: the semantic_search, find_vendor_info
// and get_chunks tools and the kb:// resource templates, each call checked
// with the auth service before anything is returned.
package tools

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/readscope"
	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/mcptrace"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
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
	// DefaultFormat is the format of answers that name none
	// (render.DefaultFormat when empty).
	DefaultFormat render.Format
	// Desktop enables the desktop signals (ENABLE_DESKTOP_ENHANCEMENTS).
	Desktop bool
	Signals signals.Config
	// AllowCache remembers keys auth allowed a moment ago, whose calls may
	// then start while they are checked; nil waits for every check.
	AllowCache *allowcache.Cache
	// Answers keeps finished answers (NewAnswerCache), so a call repeated
	// within its TTL, while the index has not changed, asks no backend;
	// nil keeps none.
	Answers *AnswerCache
	// Index says when the search index may have changed
	// (indexwatch.Watcher): answers are kept and found only under the
	// epoch current at the call. Nil, or an epoch not current, and
	// Answers is neither read nor written.
	Index IndexEpoch
	// ValidateOutput checks structured answers against the output schemas.
	ValidateOutput bool
	Logger         *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Audit records every tool call and resource read (docs/AUDIT.md); nil
	// records nothing.
	Audit *auditlog.Recorder
	// Metrics counts and times every tool call (NewMetrics); nil counts
	// nothing.
	Metrics *Metrics
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
	opts = s.opts
	var srvOpts []server.ServerOption
	if opts.Metrics != nil {
		// First, so outermost: it sees what recovery makes of a panic.
		srvOpts = append(srvOpts, server.WithToolHandlerMiddleware(opts.Metrics.middleware))
	}
	srvOpts = append(srvOpts,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithElicitation(),
		server.WithRecovery(),
		server.WithInstructions(instructions),
		server.WithPromptCompletionProvider(vendorCompletions{s}),
		server.WithResourceCompletionProvider(vendorCompletions{s}),
	)
	srvOpts = append(srvOpts, Presentation()...)
	srvOpts = append(srvOpts, listFilters()...)
	if opts.ValidateOutput {
		srvOpts = append(srvOpts, server.WithOutputSchemaValidation())
	}
	// Spans for every MCP request and tool call (platform/tracing).
	srvOpts = append(srvOpts, mcptrace.ServerOption())
	m := server.NewMCPServer(ServerName, version.Version, srvOpts...)
	m.AddTool(searchTool(opts.DefaultFormat), s.semanticSearch)
	m.AddTool(vendorTool(opts.DefaultFormat), s.findVendorInfo)
	m.AddTool(chunksTool(opts.DefaultFormat), s.getChunks)
	m.AddResourceTemplate(chunkTemplate(), s.readChunk)
	m.AddResourceTemplate(vendorTemplate(), s.readVendor)
	m.AddPrompts(Prompts()...)
	return m
}

// Catalog is the server's tools and resource templates without their
// handlers: the bridge (stdio to a remote endpoint) lists these and
// forwards the calls.
func Catalog() ([]mcp.Tool, []mcp.ResourceTemplate) {
	return []mcp.Tool{searchTool(render.DefaultFormat), vendorTool(render.DefaultFormat), chunksTool(render.DefaultFormat)},
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
	if opts.DefaultFormat == "" {
		opts.DefaultFormat = render.DefaultFormat
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

func formatOption(def render.Format) mcp.ToolOption {
	return mcp.WithString("format",
		mcp.Enum(render.Names()...),
		mcp.DefaultString(string(def)),
		mcp.Description(`"markdown" (compact), "json" (the envelope) or "both"; structuredContent always holds the envelope.`))
}

func searchTool(format render.Format) mcp.Tool {
	return mcp.NewTool(ToolSemanticSearch,
		mcp.WithDescription("Use this first for information in the BMCIS knowledge base. It finds the document chunks most relevant to a question or keywords (BM25 + vector similarity, fused by rank). "+
			"response_mode: "+projection.Describe(projection.SearchResult, projection.Metadata)+". "+
			"Page with the previous answer's cursor; read chosen chunks in full with get_chunks."),
		toolPresentation("Search the knowledge base"),
		mcp.WithString("query", mcp.Required(), mcp.MaxLength(limits.SearchQuery.Max),
			mcp.Description("A question or keywords.")),
		mcp.WithInteger("page_size", mcp.Min(float64(limits.SearchPageSize.Min)), mcp.Max(float64(limits.SearchPageSize.Max)), mcp.DefaultNumber(limits.DefaultPageSize),
			mcp.Description("Results per page.")),
		mcp.WithInteger("top_k", mcp.Min(float64(limits.SearchPageSize.Min)), mcp.Max(float64(limits.SearchPageSize.Max)),
			mcp.Description("Deprecated alias of page_size.")),
		mcp.WithString("cursor",
			mcp.Description("pagination.cursor of the previous answer to the same query.")),
		mcp.WithString("response_mode", mcp.Enum(projection.Names()...), mcp.DefaultString(string(projection.Metadata)),
			mcp.Description("Detail per result; with a cursor, the cursor's mode.")),
		mcp.WithArray("fields", mcp.WithStringEnumItems(projection.AllSearchFields()), mcp.MaxItems(projection.MaxRequestedFields),
			mcp.Description("Only these fields of the response_mode (no desktop signals). Default: all.")),
		formatOption(format),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolSemanticSearch)),
	)
}

func vendorTool(format render.Format) mcp.Tool {
	return mcp.NewTool(ToolFindVendorInfo,
		mcp.WithDescription("Use this for a named vendor: its entities, relationships and statistics in the vendor graph. "+
			"Names match ignoring case and punctuation; an ambiguous or unknown name answers with candidates. "+
			"response_mode: "+projection.Describe(projection.VendorResult, projection.Metadata)+"."),
		toolPresentation("Look up a vendor"),
		mcp.WithString("vendor_name", mcp.Required(), mcp.MinLength(limits.VendorName.Min), mcp.MaxLength(limits.VendorName.Max),
			mcp.Description("The vendor's name or alias.")),
		mcp.WithString("response_mode", mcp.Enum(projection.Names()...), mcp.DefaultString(string(projection.Metadata)),
			mcp.Description("Detail level.")),
		mcp.WithBoolean("include_relationships", mcp.DefaultBool(true),
			mcp.Description("Return relationships.")),
		formatOption(format),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolFindVendorInfo)),
	)
}

func chunksTool(format render.Format) mcp.Tool {
	return mcp.NewTool(ToolGetChunks,
		mcp.WithDescription("Use this after semantic_search to read the chunks that matter, by id. "+
			"Chunks come in the order asked; unknown ids are reported in a warning. "+
			"response_mode: "+projection.Describe(projection.ChunkResult, projection.Full)+"."),
		toolPresentation("Read chunks by id"),
		mcp.WithArray("chunk_ids", mcp.Required(), mcp.WithIntegerItems(), mcp.MinItems(limits.ChunkIDs.Min), mcp.MaxItems(limits.ChunkIDs.Max),
			mcp.Description("chunk_id values from semantic_search.")),
		mcp.WithString("response_mode", mcp.Enum(projection.Names()...), mcp.DefaultString(string(projection.Full)),
			mcp.Description("Detail per chunk.")),
		mcp.WithArray("fields", mcp.WithStringEnumItems(projection.AllChunkFields()), mcp.MaxItems(projection.MaxRequestedFields),
			mcp.Description("Only these fields of the response_mode.")),
		formatOption(format),
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithRawOutputSchema(OutputSchema(ToolGetChunks)),
	)
}

// newCall starts answering a call: a request id shared by the envelope and
// the backend calls, the start time, and the output format.
func (s *Server) newCall(ctx context.Context, op string, format render.Format) (context.Context, *respond.Call) {
	id := logging.NewRequestID()
	ctx = logging.WithRequestID(ctx, id)
	// The services cache replies per caller, so cache_hit tells a caller
	// only about its own earlier calls (platform/cacheowner).
	ctx = cacheowner.With(ctx, s.opts.Key(ctx))
	ctx = withAuditNote(ctx)
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
	// staleKey: auth could not reach its database and vouched for the key
	// from a cached record.
	staleKey bool
	// scope is what the key may read and use: its category and tool scopes
	// (none for an unscoped key) and the caller's access set (Check's
	// Principal.access).
	scope allowcache.Scope
}

// warnings are what the answer says about how the call was checked.
func (a authInfo) warnings() []envelope.Warning {
	var out []envelope.Warning
	if a.degraded {
		out = append(out, warnings.NewRateLimiterDegraded())
	}
	if a.staleKey {
		out = append(out, warnings.NewAuthDegraded())
	}
	return out
}

// scoped returns ctx carrying the key's category scope and the caller's
// access set: every search read made with it stays inside what the caller
// may read.
func (a authInfo) scoped(ctx context.Context) context.Context { return withReadScope(ctx, a.scope) }

// withReadScope is the one place a call's context gets its read scope,
// whether the call starts after its check (authInfo.scoped) or before it,
// with the scope the allow cache remembered (guarded).
func withReadScope(ctx context.Context, sc allowcache.Scope) context.Context {
	return readscope.WithAccess(readscope.With(ctx, sc.Categories), sc.Access)
}

// checkScope is the scope an allowed check answered with: the key's
// categories and tools, the caller's access set.
func checkScope(resp *authv1.CheckResponse) allowcache.Scope {
	return allowcache.NewScope(resp.GetScopes().GetCategories(), resp.GetPrincipal().GetAccess(), resp.GetScopes().GetTools())
}

// guarded runs the auth check, then the backend call (nil for none): no
// backend work starts for a key auth has not allowed. A call that spends a
// unit of the key's lease (allowcache.Spend) is not checked: auth charged
// it ahead, and it runs as the check that granted the lease allowed. A key this replica
// allowed for op a moment ago (Options.AllowCache) may start its call while
// the check runs, inside the scope it was allowed with then; its result is
// used only when the check allows the same scope again. A denial or an
// error cancels it and nothing from it is used; another scope cancels it
// and the call runs again inside the new one.
// A refused early call is not waited for: call must return what it
// produces and write nothing its caller reads.
func guarded[T any](ctx context.Context, s *Server, op string, call func(context.Context) (T, error)) (T, authInfo, *apierr.Error, error) {
	var zero T
	key := s.opts.Key(ctx)
	if key == "" {
		return zero, authInfo{}, apierr.NewAuthRequired(s.opts.KeyHint), nil
	}
	leased, onLease, ask := s.opts.AllowCache.Spend(key, op)
	if onLease {
		// Prepaid by the check that granted the lease: that check's
		// principal and scope, and no warnings (auth leases only with a
		// counting limiter and a fresh key record).
		notePrincipal(ctx, &authv1.Principal{KeyId: leased.KeyID})
		info := authInfo{scope: leased.Scope}
		if call == nil {
			return zero, info, nil, nil
		}
		v, err := call(info.scoped(ctx))
		return v, info, nil, err
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	var remembered allowcache.Scope
	early := false
	// A list's remembered allow (listScope) is for lists only: it never
	// starts a call's work early.
	if call != nil && op != OpToolsList {
		remembered, early = s.opts.AllowCache.Take(key, op)
	}
	if early {
		go func() {
			v, err := call(withReadScope(bctx, remembered))
			ch <- result{v, err}
		}()
	}
	// refuse drops the early call, if any, and forgets the key, for its
	// lists too: a spent or revoked key's next list asks auth again.
	refuse := func() {
		cancel()
		s.opts.AllowCache.Forget(key, op)
		s.opts.AllowCache.Forget(key, OpToolsList)
		if early {
			s.opts.AllowCache.Settled(false)
		}
	}
	resp, err := s.clients.CheckLease(ctx, key, op, ask)
	if err != nil {
		refuse()
		return zero, authInfo{}, authUnreachable(err), nil
	}
	if !resp.GetAllowed() {
		notePrincipal(ctx, resp.GetPrincipal()) // a refused known key is still someone
		refuse()
		return zero, authInfo{}, s.denial(resp, op), nil
	}
	notePrincipal(ctx, resp.GetPrincipal())
	info := authInfo{degraded: resp.GetLimiterDegraded(), staleKey: resp.GetKeyRecordStale(), scope: checkScope(resp)}
	if tools := resp.GetScopes().GetTools(); len(tools) > 0 && !slices.Contains(tools, op) {
		// The auth service refuses this already; an answer remembered for
		// another tool must not let it through.
		refuse()
		return zero, authInfo{}, apierr.NewToolNotAllowed(op, tools), nil
	}
	if resp.GetLimiterDegraded() {
		// Units unknown: such keys always wait for their check.
		s.opts.AllowCache.Forget(key, op)
	} else {
		var lease allowcache.Grant
		if l := resp.GetLease(); l != nil {
			lease = allowcache.Grant{KeyID: resp.GetPrincipal().GetKeyId(), ID: l.GetId(), Units: int64(l.GetUnits()),
				Valid: time.Duration(l.GetValidMs()) * time.Millisecond}
		}
		s.opts.AllowCache.AllowedWith(key, op, leastRemaining(resp.GetRemaining()), info.scope, lease)
	}
	if call == nil {
		return zero, info, nil, nil
	}
	if early {
		if info.scope.Equal(remembered) {
			s.opts.AllowCache.Settled(true)
			r := <-ch
			return r.v, info, nil, r.err
		}
		// Allowed, but with another scope than the early call ran in
		// (groups or scopes changed): drop it, and wait for it to end so
		// that nothing of it overlaps the call made in the new scope.
		cancel()
		<-ch
		s.opts.AllowCache.Settled(false)
	}
	v, err := call(info.scoped(ctx))
	return v, info, nil, err
}

// leastRemaining is the fewest units left in any tier: how many calls the
// allow cache may start early before the next check says otherwise.
func leastRemaining(r *authv1.RateLimits) int64 {
	least := int64(-1)
	for _, t := range r.GetTiers() {
		if least < 0 || t.GetValue() < least {
			least = t.GetValue()
		}
	}
	return max(least, 0)
}

func (s *Server) denial(resp *authv1.CheckResponse, op string) *apierr.Error {
	switch resp.GetDenialReason() {
	case authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED:
		return apierr.NewAuthRequired(s.opts.KeyHint)
	case authv1.DenialReason_DENIAL_REASON_RATE_LIMIT:
		var rem []envelope.TierCount
		for _, t := range resp.GetRemaining().GetTiers() {
			rem = append(rem, envelope.TierCount{Tier: t.GetTier(), Value: t.GetValue()})
		}
		return apierr.NewRateLimit(envelope.NewRemaining(rem), int(resp.GetResetInSeconds()))
	case authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED:
		return apierr.NewAuthInvalid(apierr.ReasonExpired, resp.GetMessage())
	case authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED:
		return apierr.NewAuthInvalid(apierr.ReasonRevoked, resp.GetMessage())
	case authv1.DenialReason_DENIAL_REASON_TOOL_NOT_ALLOWED:
		return apierr.NewToolNotAllowed(op, resp.GetScopes().GetTools())
	case authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED:
		return apierr.NewAuthThrottled(int(resp.GetResetInSeconds()), resp.GetMessage())
	case authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE:
		// Closed mode with the shared limiter down: no quota was spent, so
		// not RATE_LIMIT; the deployment is briefly unable to count calls.
		return apierr.NewServiceUnavailable("auth", "rate limits cannot be counted right now (the shared limiter is down)", true)
	}
	return apierr.NewAuthInvalid(apierr.ReasonInvalid, resp.GetMessage())
}

// logDone records a finished call: the log line, the audit entry and the
// outcome the metrics count.
func (s *Server) logDone(ctx context.Context, call *respond.Call, res *mcp.CallToolResult) {
	noteOutcome(ctx, outcomeOf(call, res))
	s.audit(ctx, call, res)
	status := "success"
	if res != nil && res.IsError {
		status = "error"
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "tool call",
		slog.String("tool", call.Operation),
		slog.String("request_id", call.RequestID),
		slog.String("status", status),
		slog.String("cache_key", call.CacheKey),
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
