// Package bridge is the adapter's bridge mode: an MCP server on stdio for
// Claude Desktop whose calls go, with the user's own API key, to the
// deployed streamable-HTTP endpoint, the way any remote client reaches the
// product. The machine running it holds no service credential and no
// backend address.
//
// initialize, tools/list and resources/templates/list are answered from
// the catalogue compiled into the binary, so the server starts and lists
// its tools even when the endpoint is down; with a key, the lists keep only
// what the endpoint's tools/list shows the key (its tool scope), when the
// endpoint answers. tools/call and resources/read
// are forwarded (mcp-go's streamable-HTTP client, which negotiates the
// stateless protocol when the endpoint speaks it); when the endpoint cannot
// be reached, times out or refuses the connection, the answer is the usual
// SERVICE_UNAVAILABLE envelope, never a dead server; its HTTP status
// tells a refused key (401, 403: AUTH_INVALID), a retryable answer (408,
// 429, 5xx, whose Retry-After the bridge keeps) and a URL that names no
// MCP endpoint apart (endpointError). A question the
// endpoint asks mid-call (elicitation, as a multi round-trip request) is
// put to the Desktop user when the Desktop declared elicitation.
package bridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// Service names the endpoint in SERVICE_UNAVAILABLE answers.
const Service = string(apierr.Endpoint)

// Options configure the bridge.
type Options struct {
	// URL is the remote streamable-HTTP endpoint, e.g. https://kb.example.com/mcp.
	URL string
	// APIKey is the user's key, sent as X-API-Key on every request; when
	// empty, calls answer AUTH_REQUIRED with KeyHint without reaching the
	// endpoint.
	APIKey  string
	KeyHint string
	// Timeout bounds each HTTP request to the endpoint.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Bridge forwards an MCP session to the remote endpoint.
type Bridge struct {
	opts Options
	log  *slog.Logger
	resp *respond.Responder

	// transport carries the requests (nil: http.DefaultTransport); tests
	// set one trusting their TLS server.
	transport http.RoundTripper

	mu sync.Mutex
	// retryAt is when the endpoint's Retry-After (429, 503) lets the
	// bridge ask it again, on either connection; until then calls answer
	// without asking it.
	retryAt time.Time
	// listed is the endpoint's latest tools/list and when it answered, for
	// the lists that follow within listReuse.
	listed   []string
	listedAt time.Time
	// Two remote clients, connected on first use: one declares
	// elicitation (for a Desktop that did), one does not, so the endpoint
	// never asks a question the Desktop cannot put to the user.
	plain, eliciting *client.Client
}

// New returns the bridge; Server is its stdio-facing MCP server.
func New(opts Options) *Bridge {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	return &Bridge{opts: opts, log: opts.Logger, resp: &respond.Responder{Thresholds: warnings.Defaults}}
}

// Server builds the MCP server the Desktop talks to.
func (b *Bridge) Server() *server.MCPServer {
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithElicitation(),
		server.WithRecovery(),
		server.WithInstructions(tools.Instructions()),
		server.WithPromptCompletionProvider(forwardCompletions{b}),
		server.WithResourceCompletionProvider(forwardCompletions{b}),
	}
	hooks := &server.Hooks{}
	hooks.AddAfterListTools(b.narrowTools)
	hooks.AddAfterListResourceTemplates(b.narrowTemplates)
	opts = append(opts, server.WithHooks(hooks))
	m := server.NewMCPServer(tools.ServerName, version.Version, append(opts, tools.Presentation()...)...)
	m.AddPrompts(tools.Prompts()...)
	ts, templates := tools.Catalog()
	for _, t := range ts {
		m.AddTool(t, b.callTool)
	}
	for _, t := range templates {
		m.AddResourceTemplate(t, b.readResource)
	}
	return m
}

// Close ends the remote clients.
func (b *Bridge) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range []*client.Client{b.plain, b.eliciting} {
		if c != nil {
			_ = c.Close()
		}
	}
	b.plain, b.eliciting = nil, nil
}

// client returns a connected remote client, connecting it first when
// needed; a failed connection is retried on the next call.
func (b *Bridge) client(ctx context.Context, elicit bool) (*client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	slot := &b.plain
	if elicit {
		slot = &b.eliciting
	}
	// Before the open connection too: a Retry-After is the endpoint's,
	// whichever connection it came on (a 429 drops only its own).
	if wait := time.Until(b.retryAt); wait > 0 {
		return nil, &backingOff{wait: wait}
	}
	if *slot != nil {
		return *slot, nil
	}
	trans, err := mcptransport.NewStreamableHTTP(b.opts.URL,
		mcptransport.WithHTTPHeaders(map[string]string{"X-API-Key": b.opts.APIKey}),
		mcptransport.WithHTTPBasicClient(b.httpClient()))
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", b.opts.URL, err)
	}
	var copts []client.ClientOption
	if elicit {
		copts = append(copts, client.WithElicitationHandler(desktopElicitation{}))
	}
	c := client.NewClient(trans, copts...)
	ictx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	if err := c.Start(ictx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: remoteClientName(desktopName(ctx)), Version: version.Version}
	if _, err := c.Initialize(ictx, init); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	b.log.Info("connected to the MCP endpoint", "url", b.opts.URL, "protocol", c.ProtocolVersion())
	*slot = c
	return c, nil
}

// bridgeName is the bridge's own client name at the endpoint.
const bridgeName = tools.ServerName + "-bridge"

// maxDesktopName bounds the Desktop's name the bridge passes on (bytes),
// the bound of a REST User-Agent in the audit trail: with the bridge's
// suffix it stays under what auth keeps of a client name (256 bytes), so
// the suffix is never cut.
const maxDesktopName = 200

// desktopName is the name the Desktop gave in its initialize.
func desktopName(ctx context.Context) string {
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientInfo().Name
	}
	return ""
}

// remoteClientName is the client name the bridge gives the endpoint, which
// its audit trail records for every read: the Desktop's own
// ("claude-ai via bmcis-knowledge-bridge"), else the bridge's. The
// Desktop's is made valid UTF-8 with control characters (NUL, newlines)
// as U+FFFD, as auth stores text, and bounded on a rune boundary.
func remoteClientName(desktop string) string {
	desktop = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.TrimSpace(strings.ToValidUTF8(desktop, string(utf8.RuneError))))
	if desktop == "" {
		return bridgeName
	}
	if len(desktop) > maxDesktopName {
		n := maxDesktopName
		for !utf8.RuneStart(desktop[n]) {
			n--
		}
		desktop = strings.TrimSpace(desktop[:n])
	}
	return desktop + " via " + bridgeName
}

// httpClient is the client of every request to the endpoint (POSTs, the
// GET stream, the closing DELETE). It follows no redirect: Go would re-send
// X-API-Key to any host and scheme a redirect names (it strips only
// Authorization and Cookie), and the endpoint is configured exactly, so a
// redirect is a misconfiguration or an attack, answered with an error.
func (b *Bridge) httpClient() *http.Client {
	next := b.transport
	if next == nil {
		next = http.DefaultTransport
	}
	return &http.Client{
		Transport: recordingTransport{next: next},
		Timeout:   b.opts.Timeout,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return &redirectError{host: req.URL.Host}
		},
	}
}

// redirectError is the endpoint answering with a redirect, refused before
// anything is sent to its target. It names the target's host only.
type redirectError struct{ host string }

func (e *redirectError) Error() string {
	return "the endpoint redirected to " + e.host + "; the bridge follows no redirect"
}

// backingOff is a call made before the endpoint's Retry-After has passed.
type backingOff struct{ wait time.Duration }

func (e *backingOff) Error() string {
	return fmt.Sprintf("the endpoint asked to wait %s more (Retry-After)", e.wait.Round(time.Second))
}

// maxRetryAfter bounds the wait a Retry-After imposes, so a wrong header
// cannot keep the bridge from the endpoint for long.
const maxRetryAfter = time.Minute

// endpointAnswer is the status of the endpoint's latest HTTP answer in a
// call, which mcp-go's errors do not keep (it names any 4xx to initialize
// ErrLegacySSEServer, a proxy's 429 or 403 included).
type endpointAnswer struct {
	status      int
	mediaType   string
	retryAfter  time.Duration // 0: none, or unreadable
	jsonRPCBody bool          // a 400 whose body is a JSON-RPC error
}

// answerLog holds a call's latest endpointAnswer; each call has its own
// (in its context), so concurrent calls do not see each other's.
type answerLog struct {
	mu   sync.Mutex
	last *endpointAnswer
}

type answerLogKey struct{}

// withAnswerLog gives a call's context its answerLog.
func withAnswerLog(ctx context.Context) context.Context {
	return context.WithValue(ctx, answerLogKey{}, &answerLog{})
}

// answerFrom is the latest HTTP answer of the call of ctx; nil when there
// was none or the latest request got no answer.
func answerFrom(ctx context.Context) *endpointAnswer {
	l, ok := ctx.Value(answerLogKey{}).(*answerLog)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// recordingTransport notes each answer in the answerLog of its request's
// context.
type recordingTransport struct{ next http.RoundTripper }

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	l, ok := req.Context().Value(answerLogKey{}).(*answerLog)
	if !ok {
		return resp, err
	}
	var a *endpointAnswer
	if err == nil {
		a = &endpointAnswer{status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
		a.mediaType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode == http.StatusBadRequest {
			a.jsonRPCBody = peekJSONRPCError(resp)
		}
	}
	l.mu.Lock()
	l.last = a
	l.mu.Unlock()
	return resp, err
}

// retryAfter reads a Retry-After header (seconds or an HTTP date) as a
// wait bounded by maxRetryAfter; 0 when absent, past or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(h); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// peekJSONRPCError reports whether a response's body is a JSON-RPC error,
// leaving the body readable for mcp-go.
func peekJSONRPCError(resp *http.Response) bool {
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		Error   json.RawMessage `json:"error"`
	}
	return json.Unmarshal(head, &msg) == nil && msg.JSONRPC == "2.0" && len(msg.Error) > 0
}

// drop forgets a client after a transport failure, so the next call
// connects afresh.
func (b *Bridge) drop(c *client.Client) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, slot := range []**client.Client{&b.plain, &b.eliciting} {
		if *slot == c {
			_ = c.Close()
			*slot = nil
		}
	}
}

// desktopElicitation puts the endpoint's question to the Desktop user
// through the stdio session of the call being forwarded.
type desktopElicitation struct{}

func (desktopElicitation) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	res, err := srv.RequestElicitation(ctx, req)
	if err != nil || res == nil {
		// The Desktop could not be asked: the endpoint answers as it does
		// for a declined question (the needs_input envelope).
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	return res, nil
}

// desktopElicits reports whether the Desktop declared elicitation.
func desktopElicits(ctx context.Context) bool {
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && s.GetClientCapabilities().Elicitation != nil
}

func (b *Bridge) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if b.opts.APIKey == "" {
		return b.failure(req.Params.Name, formatOf(req), apierr.NewAuthRequired(b.opts.KeyHint)), nil
	}
	ctx = withAnswerLog(ctx)
	c, err := b.client(ctx, desktopElicits(ctx))
	if err != nil {
		return b.unavailable(ctx, req.Params.Name, formatOf(req), err), nil
	}
	fwd := mcp.CallToolRequest{}
	fwd.Params.Name = req.Params.Name
	fwd.Params.Arguments = req.Params.Arguments
	res, err := c.CallTool(ctx, fwd)
	if err != nil {
		if rpcErr(err) {
			return nil, err // the endpoint's own answer to a bad request
		}
		b.drop(c)
		return b.unavailable(ctx, req.Params.Name, formatOf(req), err), nil
	}
	render.Compact(res.Content)
	inDesktopProtocol(ctx, &res.Result)
	return res, nil
}

// inDesktopProtocol removes from a forwarded result what the endpoint's
// protocol (2026-07-28 on, which the bridge negotiates with it) adds and
// the one the Desktop negotiated does not define: resultType, and the
// reserved io.modelcontextprotocol/ keys of _meta (serverInfo, with its
// icon, on every answer). Left in, they cost bytes and tokens each call.
func inDesktopProtocol(ctx context.Context, r *mcp.Result) {
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithProtocolVersion); ok && mcp.IsModernProtocol(s.ProtocolVersion()) {
		return
	}
	r.ResultType = ""
	if r.Meta == nil {
		return
	}
	for k := range r.Meta.AdditionalFields {
		if strings.HasPrefix(k, reservedMetaPrefix) {
			delete(r.Meta.AdditionalFields, k)
		}
	}
	if len(r.Meta.AdditionalFields) == 0 && r.Meta.ProgressToken == nil {
		r.Meta = nil
	}
}

// reservedMetaPrefix starts the _meta keys the protocol itself defines.
const reservedMetaPrefix = "io.modelcontextprotocol/"

// forwardCompletions asks the endpoint for the completions it offers
// (vendor names from its graph); nothing when it cannot be reached, since
// completion is a typing aid.
type forwardCompletions struct{ b *Bridge }

func (f forwardCompletions) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	return f.forward(ctx, mcp.PromptReference{Type: "ref/prompt", Name: name}, arg, cc), nil
}

func (f forwardCompletions) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	return f.forward(ctx, mcp.ResourceReference{Type: "ref/resource", URI: uri}, arg, cc), nil
}

func (f forwardCompletions) forward(ctx context.Context, ref any, arg mcp.CompleteArgument, cc mcp.CompleteContext) *mcp.Completion {
	empty := &mcp.Completion{Values: []string{}}
	if f.b.opts.APIKey == "" || !tools.Completes(ref, arg) {
		return empty
	}
	c, err := f.b.client(withAnswerLog(ctx), false)
	if err != nil {
		return empty
	}
	req := mcp.CompleteRequest{}
	req.Params.Ref, req.Params.Argument, req.Params.Context = ref, arg, cc
	res, err := c.Complete(ctx, req)
	if err != nil {
		if !rpcErr(err) {
			f.b.drop(c)
		}
		f.b.log.WarnContext(ctx, "MCP endpoint completion failed", "error", err.Error())
		return empty
	}
	return &res.Completion
}

func (b *Bridge) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	// The resources answer like their tools, format "both".
	tool := tools.ToolGetChunks
	if strings.HasPrefix(req.Params.URI, "kb://vendors/") {
		tool = tools.ToolFindVendorInfo
	}
	if b.opts.APIKey == "" {
		return tools.ResourceContents(req.Params.URI, b.failure(tool, render.Both, apierr.NewAuthRequired(b.opts.KeyHint))), nil
	}
	ctx = withAnswerLog(ctx)
	c, err := b.client(ctx, false)
	if err == nil {
		fwd := mcp.ReadResourceRequest{}
		fwd.Params.URI = req.Params.URI
		var res *mcp.ReadResourceResult
		if res, err = c.ReadResource(ctx, fwd); err == nil {
			return res.Contents, nil
		}
		if rpcErr(err) {
			return nil, err
		}
		b.drop(c)
	}
	return tools.ResourceContents(req.Params.URI, b.unavailable(ctx, tool, render.Both, err)), nil
}

// listTimeout bounds the endpoint's tools/list behind a Desktop's: an
// endpoint that does not answer must not hold the Desktop's start.
const listTimeout = 5 * time.Second

// listReuse is how long the endpoint's tools/list answers the Desktop's
// lists: a Desktop lists tools and then templates at start, and each
// endpoint list costs an unscoped key a rate-limit unit. A scope change
// shows within it.
const listReuse = 10 * time.Second

// remoteTools asks the endpoint which tools the key may call: the names of
// its tools/list, which the endpoint narrows to the key's tool scope. ok is
// false without a key, or when the endpoint did not list (down, slow, the
// key refused): the offline catalogue is then listed whole, as before, for
// it is public and the endpoint still checks every call.
func (b *Bridge) remoteTools(ctx context.Context) (names []string, ok bool) {
	if b.opts.APIKey == "" {
		return nil, false
	}
	b.mu.Lock()
	if b.listed != nil && time.Since(b.listedAt) < listReuse {
		names = b.listed
		b.mu.Unlock()
		return names, true
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(withAnswerLog(ctx), min(listTimeout, b.opts.Timeout))
	defer cancel()
	c, err := b.client(ctx, false)
	if err != nil {
		b.log.Warn("endpoint tools/list", "answer", b.classify(ctx, err).Message, "error", err.Error())
		return nil, false
	}
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		if rpcErr(err) { // the endpoint's own refusal: its message says it
			b.log.Warn("endpoint tools/list", "error", err.Error())
			return nil, false
		}
		b.drop(c)
		b.log.Warn("endpoint tools/list", "answer", b.classify(ctx, err).Message, "error", err.Error())
		return nil, false
	}
	names = []string{} // listed, even if empty
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	b.mu.Lock()
	b.listed, b.listedAt = names, time.Now()
	b.mu.Unlock()
	return names, true
}

// narrowTools keeps, of the offline catalogue, the tools the endpoint
// lists for the key: its descriptions stay the bridge's own (the same
// bytes as offline), only the choice comes from the endpoint.
func (b *Bridge) narrowTools(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
	names, ok := b.remoteTools(ctx)
	if !ok || res == nil {
		return
	}
	res.Tools = slices.DeleteFunc(slices.Clone(res.Tools), func(t mcp.Tool) bool { return !slices.Contains(names, t.Name) })
}

// narrowTemplates keeps the resource templates whose tool (tools.AccessRule)
// the endpoint lists for the key.
func (b *Bridge) narrowTemplates(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
	names, ok := b.remoteTools(ctx)
	if !ok || res == nil {
		return
	}
	res.ResourceTemplates = slices.DeleteFunc(slices.Clone(res.ResourceTemplates), func(t mcp.ResourceTemplate) bool {
		tool, _ := tools.AccessRule(t.URITemplate.Raw())
		return !slices.Contains(names, tool)
	})
}

// rpcErr reports whether err is a JSON-RPC error the endpoint answered
// (the request reached it and was refused as such), as opposed to a
// transport failure, a timeout or an HTTP error without a JSON-RPC body.
func rpcErr(err error) bool {
	var te *mcptransport.Error
	return !errors.As(err, &te) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// unavailable is the answer for a call the endpoint did not answer:
// SERVICE_UNAVAILABLE, or AUTH_INVALID when the endpoint or a proxy in
// front of it refused access. The cause goes to the log (stderr), a plain
// reason to the user.
func (b *Bridge) unavailable(ctx context.Context, tool string, format render.Format, cause error) *mcp.CallToolResult {
	e := b.classify(ctx, cause)
	res := b.failure(tool, format, e)
	// answer: what the user was told (the classified HTTP status); error:
	// the MCP client's own wording, which may guess wrong ("legacy SSE").
	b.log.WarnContext(ctx, "MCP endpoint call failed", "tool", tool, "answer", e.Message, "error", cause.Error())
	return res
}

// classify is endpointError for the request of ctx, keeping the
// endpoint's Retry-After: until it has passed the bridge asks nothing.
func (b *Bridge) classify(ctx context.Context, cause error) *apierr.Error {
	answer := answerFrom(ctx)
	e := b.endpointError(cause, answer)
	if answer != nil && answer.retryAfter > 0 && e.Retryable {
		b.mu.Lock()
		b.retryAt = time.Now().Add(answer.retryAfter)
		b.mu.Unlock()
	}
	return e
}

// endpointError classifies a failed call by its cause and the endpoint's
// latest HTTP answer, if any.
func (*Bridge) endpointError(cause error, answer *endpointAnswer) *apierr.Error {
	var redirect *redirectError
	var backoff *backingOff
	var netErr net.Error
	switch {
	case errors.As(cause, &redirect): // before net.Error: *url.Error is one
		return apierr.NewServiceUnavailable(Service, "it answered with a redirect to "+redirect.host+", which the bridge does not follow (the API key goes to BMCIS_MCP_URL only); set BMCIS_MCP_URL to the endpoint's exact address", false)
	case errors.As(cause, &backoff):
		return apierr.NewServiceUnavailable(Service, "it asked for a pause (Retry-After), which the bridge keeps", true).
			WithRetryAfter(int((backoff.wait + time.Second - 1) / time.Second))
	case errors.Is(cause, context.Canceled):
		return apierr.NewServiceUnavailable(Service, "the call was cancelled", true)
	case errors.Is(cause, context.DeadlineExceeded), errors.As(cause, &netErr) && netErr.Timeout():
		return apierr.NewServiceUnavailable(Service, "it did not answer in time", true)
	}
	if e := httpStatusError(answer); e != nil {
		return e
	}
	var authErr *mcptransport.AuthorizationRequiredError
	switch {
	case errors.As(cause, &authErr), errors.Is(cause, mcptransport.ErrUnauthorized):
		return accessRefused(http.StatusUnauthorized)
	case errors.Is(cause, mcptransport.ErrLegacySSEServer):
		return notMCP("HTTP 4xx")
	case errors.As(cause, &netErr):
		return apierr.NewServiceUnavailable(Service, "it could not be reached; check BMCIS_MCP_URL and the network", true)
	}
	return apierr.NewServiceUnavailable(Service, "it answered with an error", true)
}

// httpStatusError classifies the endpoint's HTTP answer; nil when it is a
// success carrying MCP (the failure lies elsewhere).
//
// 400 is "not MCP" only without a JSON-RPC error body: the Streamable HTTP
// spec has an MCP server answer 400 to a request it refuses as MCP (an
// unsupported protocol version, a missing session), with a JSON-RPC error
// body when it gives one, while its backwards-compatibility rule reads any
// other 4xx to initialize (404 and 405 named) as "not this transport here".
func httpStatusError(a *endpointAnswer) *apierr.Error {
	if a == nil {
		return nil
	}
	status := fmt.Sprintf("HTTP %d", a.status)
	var e *apierr.Error
	switch {
	case a.status == http.StatusUnauthorized, a.status == http.StatusForbidden:
		return accessRefused(a.status)
	case a.status == http.StatusTooManyRequests:
		e = apierr.NewServiceUnavailable(Service, "it is limiting requests ("+status+")", true)
	case a.status == http.StatusRequestTimeout:
		e = apierr.NewServiceUnavailable(Service, "it gave up waiting for the request ("+status+")", true)
	case a.status >= 500:
		e = apierr.NewServiceUnavailable(Service, "it answered with an error ("+status+")", true)
	case a.status == http.StatusBadRequest && a.jsonRPCBody:
		return apierr.NewServiceUnavailable(Service, "it refused the bridge's request ("+status+" with a JSON-RPC error), most likely a protocol version it does not support; update the BMCIS Knowledge extension, or ask your administrator which version the endpoint runs", false)
	case a.status >= 400:
		return notMCP(status)
	case a.status >= 200 && a.status < 300 && a.mediaType != "application/json" && a.mediaType != "text/event-stream":
		return notMCP(status + " with " + cmp.Or(a.mediaType, "no content type"))
	default:
		return nil
	}
	if a.retryAfter > 0 {
		e.WithRetryAfter(int((a.retryAfter + time.Second - 1) / time.Second))
	}
	return e
}

// notMCP is the answer when BMCIS_MCP_URL names another web server or
// path (the gateway, a missing /mcp), which no retry mends.
func notMCP(answered string) *apierr.Error {
	e := apierr.NewServiceUnavailable(Service, "", false)
	// Something answered, so no service is down: the URL is what is wrong.
	// The code and the details stay SERVICE_UNAVAILABLE's.
	e.Message = "BMCIS_MCP_URL does not name an MCP endpoint: it answered " + answered + "; it should be the adapter's address, ending in /mcp."
	// The user's own setting is what to fix, as for a 401.
	e.Suggestion = "Check the extension's Server URL setting, or BMCIS_MCP_URL (ask your BMCIS administrator for the endpoint's address, ending in /mcp), then restart Claude Desktop; retrying will not help."
	return e
}

// accessRefused is the answer to a 401 or 403 from the endpoint or a
// proxy in front of it. It names what to fix, never the key.
func accessRefused(status int) *apierr.Error {
	if status == http.StatusForbidden {
		return apierr.NewAccessRefused("HTTP_403",
			"The "+Service+", or a proxy or firewall in front of it, refused access (HTTP 403).",
			"Check that the API key (the extension's API key setting, or BMCIS_API_KEY) is valid for BMCIS_MCP_URL and that this machine may reach it (VPN, allow-list); ask your BMCIS administrator if it persists.")
	}
	return apierr.NewAccessRefused("HTTP_401",
		"The "+Service+" refused the API key (HTTP 401).",
		"Check the API key (the extension's API key setting, or BMCIS_API_KEY) and BMCIS_MCP_URL, then restart Claude Desktop.")
}

// failure is an error envelope answered by the bridge itself.
func (b *Bridge) failure(tool string, format render.Format, e *apierr.Error) *mcp.CallToolResult {
	call := &respond.Call{Operation: tool, RequestID: logging.NewRequestID(), Started: time.Now(), Format: format, View: render.View{Tool: tool}}
	return b.resp.Failure(call, e)
}

// formatOf is the call's format argument (the default format when absent
// or invalid).
func formatOf(req mcp.CallToolRequest) render.Format {
	s, _ := req.GetArguments()["format"].(string)
	f, ok := render.ParseFormat(s, render.DefaultFormat)
	if !ok {
		return render.DefaultFormat
	}
	return f
}
