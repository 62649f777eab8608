// Package transport serves the MCP server over stdio (Claude Desktop starts
// the binary) or streamable HTTP (remote clients; stateless, so any replica
// answers any request).
package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bmcis/knowledge/platform/clientaddr"
	"github.com/bmcis/knowledge/platform/connlimit"
	"github.com/bmcis/knowledge/platform/origin"
	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// StdioKeyHint tells a stdio user how to supply a key.
const StdioKeyHint = "Set the API key: for the BMCIS Knowledge extension, in its settings (API key); for a claude_desktop_config.json entry, as BMCIS_API_KEY in the env of the bmcis-knowledge server. Then restart Claude Desktop."

// HTTPKeyHint tells an HTTP client how to supply a key.
const HTTPKeyHint = "Send the API key in the X-API-Key header or as Authorization: Bearer <key>."

// ServeStdio serves one client on in/out until in closes or ctx ends. A
// call of an unknown tool is answered before mcp-go sees it, as over HTTP
// (rpcMessage.unknownTool).
func ServeStdio(ctx context.Context, m *server.MCPServer, in io.Reader, out io.Writer, logger *slog.Logger) error {
	s := server.NewStdioServer(m)
	s.SetErrorLogger(log.New(slogWriter{logger}, "", 0))
	// mcp-go writes each message with one Write; so does answerUnknown:
	// one lock keeps the lines whole.
	w := &lockedWriter{w: out}
	err := s.Listen(ctx, &stdinFilter{r: bufio.NewReader(in), answer: func(line []byte) bool {
		return answerUnknownTool(m, line, w)
	}}, w)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// answerUnknownTool writes the answer to a stdio line that calls an
// unknown tool and reports whether it did.
func answerUnknownTool(m *server.MCPServer, line []byte, w io.Writer) bool {
	var msg rpcMessage
	if json.Unmarshal(line, &msg) != nil {
		return false // mcp-go answers what does not parse
	}
	answer := msg.unknownTool(m)
	if answer == nil {
		return false
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return false
	}
	_, _ = w.Write(append(b, '\n')) // a failed write ends mcp-go's next one too
	return true
}

// stdinFilter passes the lines of r on, except those answer took.
type stdinFilter struct {
	r       *bufio.Reader
	answer  func(line []byte) bool
	pending []byte
	err     error
}

func (f *stdinFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.r.ReadBytes('\n')
		f.err = err
		if len(line) > 0 && !f.answer(line) {
			f.pending = line
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// lockedWriter serialises Writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn("mcp stdio", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}

// APIKey extracts the caller's key from X-API-Key or an Authorization
// bearer token.
func APIKey(h http.Header) string {
	if k := strings.TrimSpace(h.Get("X-API-Key")); k != "" {
		return k
	}
	auth := strings.TrimSpace(h.Get("Authorization"))
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// DefaultMaxBodyBytes is the default size limit of an /mcp request body.
const DefaultMaxBodyBytes = 1 << 20

// HealthName is the name /healthz reports.
const HealthName = "bmcis-mcp-adapter"

// HTTPHandler routes /mcp to the streamable HTTP server, /healthz to a
// liveness probe and /readyz to a readiness probe that asks each backend's
// gRPC health service. Request bodies on /mcp larger than maxBody bytes
// (DefaultMaxBodyBytes when <= 0) answer 413 without reaching mcp-go, which
// reads whole bodies into memory. listScope (tools.NewListScope) limits
// tools/list and resources/templates/list to what the caller may call; nil
// lists everything to everyone.
func HTTPHandler(m *server.MCPServer, clients *backend.Clients, logger *slog.Logger, maxBody int64, listScope tools.ListScope) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	mcpHTTP := server.NewStreamableHTTPServer(m,
		server.WithStateLess(true),
		server.WithStreamableHTTPLogger(logger),
		server.WithHTTPContextFunc(callerContext),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", postOnly(limitBody(explainMalformed(m, listScope, mcpHTTP), maxBody)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "name": HealthName, "version": version.Version})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		backends := clients.Health(r.Context(), time.Second)
		code, state := http.StatusOK, "ready"
		for _, s := range backends {
			if s != "SERVING" {
				code, state = http.StatusServiceUnavailable, "degraded"
			}
		}
		writeJSON(w, code, map[string]any{"status": state, "backends": backends})
	})
	return mux
}

// callerContext puts in ctx who the request's caller is, as the tools read
// it: its network address and its credential.
func callerContext(ctx context.Context, r *http.Request) context.Context {
	if host := clientAddress(r); host != "" {
		ctx = backend.WithClientAddress(ctx, host)
	}
	if id, ok := oauth.FromContext(r.Context()); ok {
		// WithOAuth verified an access token: the credential the
		// tools see names the identity, never the token.
		return oauth.WithIdentity(tools.WithAPIKey(ctx, id.CacheKey()), id)
	}
	return tools.WithAPIKey(ctx, APIKey(r.Header))
}

// ListRefusedCode is the JSON-RPC error code of a tools/list or
// resources/templates/list whose caller's scope cannot be read (auth down,
// a bad key, a spent rate limit): a server error (-32000..-32099) whose
// data is the error member a tool call's envelope carries (code, message,
// retryable, ...). No list is sent then, never the full one.
const ListRefusedCode = -32001

// scopeList reads the caller's tool scope (listScope) for a tools/list or
// resources/templates/list request and serves it with that scope for the
// tools' filters (tools.WithListedTools), or answers the typed error
// instead of a list. Calls are checked by their handlers, not here.
func scopeList(listScope tools.ListScope, msg *rpcMessage, h http.Handler, w http.ResponseWriter, r *http.Request) {
	allowed, e := listScope(callerContext(r.Context(), r))
	if e != nil {
		writeJSON(w, http.StatusOK, map[string]any{
			"jsonrpc": "2.0",
			"id":      msg.ID,
			"error":   map[string]any{"code": ListRefusedCode, "message": e.Message, "data": e.Envelope()},
		})
		return
	}
	h.ServeHTTP(w, r.WithContext(tools.WithListedTools(r.Context(), allowed)))
}

// isList reports whether the message is a request for a list a tool scope
// narrows.
func (c *rpcMessage) isList() bool {
	return c.Method != nil && len(c.ID) > 0 &&
		(*c.Method == string(mcp.MethodToolsList) || *c.Method == string(mcp.MethodResourcesTemplatesList))
}

// clientAddress is the request's client (platform/clientaddr): its
// connection's address, or what a trusted proxy (BMCIS_TRUSTED_PROXIES)
// forwarded; auth budgets failed checks by it, and the audit trail names it.
func clientAddress(r *http.Request) string { return clientaddr.Of(r) }

// postOnly answers anything but POST on /mcp with 405 at once. The server
// is stateless: a GET event stream could carry nothing (no session has
// anything to push), yet mcp-go would hold it open for ever, one socket
// and goroutine per request, for anyone, without a key. DELETE has no
// session to end.
func postOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{
				"jsonrpc": "2.0",
				"id":      nil,
				"error":   map[string]any{"code": -32600, "message": r.Method + " is not allowed on /mcp: this server is stateless, send requests with POST"},
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CheckOrigin refuses a request whose Origin header the policy does not
// allow with 403, on every path of the listener, before any work; a
// request without Origin (not from a browser) passes. The MCP
// streamable-HTTP transport requires this against DNS rebinding.
func CheckOrigin(p origin.Policy, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); !p.AllowsRequest(r) {
			writeJSON(w, http.StatusForbidden, map[string]any{
				"jsonrpc": "2.0",
				"id":      nil,
				"error":   map[string]any{"code": -32600, "message": "origin " + o + " is not allowed"},
			})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// limitBody caps request bodies at max bytes (http.MaxBytesReader). A POST
// body is read here, so that an oversized one answers 413 with a JSON-RPC
// error whether or not it declared its length, instead of mcp-go's
// generic parse error.
func limitBody(h http.Handler, max int64) http.Handler {
	tooLarge := func(w http.ResponseWriter) {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
			"jsonrpc": "2.0",
			"id":      nil,
			"error": map[string]any{
				"code":    -32600,
				"message": fmt.Sprintf("request body exceeds %d bytes", max),
			},
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			tooLarge(w)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					tooLarge(w)
					return
				}
				http.Error(w, "reading the request body failed", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// explainMalformed answers three mistakes with what to do, where mcp-go's
// own answers do not say: a JSON-RPC batch (valid JSON, but MCP 2025-06-18
// dropped batching; mcp-go calls it "not valid json"), a message with no
// method that is no response either (mcp-go takes it for an empty ping
// response and answers 202, though this server sends no pings: GET is
// refused, so no stream carries one) and a tools/call of a tool that does
// not exist (mcp-go's error does not name the real ones, so a model cannot
// correct itself). It runs after limitBody, which has read the body into
// memory. A list request is served within the caller's tool scope
// (scopeList, when listScope is set); everything else passes unchanged.
func explainMalformed(m *server.MCPServer, listScope tools.ListScope, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(trimmed) {
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"jsonrpc": "2.0",
				"id":      nil,
				"error": map[string]any{"code": -32600,
					"message": "JSON-RPC batch requests are not supported (MCP 2025-06-18 removed batching): send one request per POST"},
			})
			return
		}
		var call rpcMessage
		if json.Unmarshal(trimmed, &call) != nil {
			h.ServeHTTP(w, r) // not an object: mcp-go says it is not valid JSON-RPC
			return
		}
		if call.Method == nil && call.Result == nil && call.Error == nil {
			var id any // null when the message has none
			if len(call.ID) > 0 {
				id = call.ID
			}
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"jsonrpc": "2.0",
				"id":      id,
				"error": map[string]any{"code": mcp.INVALID_REQUEST,
					"message": `invalid request: a JSON-RPC request needs a "method" (a response, a "result" or an "error")`},
			})
			return
		}
		if answer := call.unknownTool(m); answer != nil {
			writeJSON(w, http.StatusOK, answer)
			return
		}
		if listScope != nil && call.isList() {
			scopeList(listScope, &call, h, w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// rpcMessage is what explainMalformed and ServeStdio read of a JSON-RPC
// message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// unknownTool is the answer to a tools/call request of a tool m does not
// have, naming the ones it has (mcp-go's error does not, so a model cannot
// correct itself); nil for any other message. Both transports answer with
// it.
func (c *rpcMessage) unknownTool(m *server.MCPServer) map[string]any {
	if c.Method == nil || *c.Method != string(mcp.MethodToolsCall) || len(c.ID) == 0 || m.GetTool(c.Params.Name) != nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(m.ListTools()))
	return map[string]any{
		"jsonrpc": "2.0",
		"id":      c.ID,
		"error": map[string]any{"code": mcp.INVALID_PARAMS,
			"message": fmt.Sprintf("unknown tool %q: call one of %s (tools/list describes them)", c.Params.Name, strings.Join(names, ", "))},
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServerLimits bound how long the HTTP server waits on a client and how
// many connections it holds.
type ServerLimits struct {
	// Read is the most time reading a whole request, body included.
	Read time.Duration
	// Idle is how long a keep-alive connection waits for the next request.
	Idle time.Duration
	// Conns bound the connections open at once, in total and per client,
	// and the wait for a request's header (platform/connlimit).
	Conns connlimit.Limits
}

// ServeHTTP listens on addr (or serves the socket a service manager passed,
// see listen) and serves until ctx ends, then shuts down gracefully (Serve).
func ServeHTTP(ctx context.Context, addr string, h http.Handler, to ServerLimits, logger *slog.Logger) error {
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, to, logger)
}

// Serve serves on ln until ctx ends, then shuts down gracefully. Zero
// timeouts take 30 s (read) and 120 s (idle); idle connections are closed
// sooner when the connection bound is reached. There is no write timeout:
// a tool call's answer may stream for as long as its backends take.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, to ServerLimits, logger *slog.Logger) error {
	logger.Info("serving MCP over streamable HTTP", "addr", ln.Addr().String(), "endpoint", "/mcp",
		"max_conns", to.Conns.MaxConns, "max_conns_per_client", to.Conns.MaxConnsPerClient)
	srv := newServer(h, to)
	errc := make(chan error, 1)
	go func() { errc <- to.Conns.Serve(srv, ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newServer(h http.Handler, to ServerLimits) *http.Server {
	if to.Read <= 0 {
		to.Read = 30 * time.Second
	}
	if to.Idle <= 0 {
		to.Idle = 120 * time.Second
	}
	return &http.Server{
		Handler:     h,
		ReadTimeout: to.Read,
		IdleTimeout: to.Idle,
	}
}

// listen returns the one listening socket passed by systemd-style socket
// activation (LISTEN_FDS=1 for this process's LISTEN_PID, on fd 3), which
// lets the service manager (or a test) hold the port before the process
// starts; otherwise it listens on addr.
func listen(addr string) (net.Listener, error) {
	if os.Getenv("LISTEN_PID") != strconv.Itoa(os.Getpid()) {
		return net.Listen("tcp", addr)
	}
	if n := os.Getenv("LISTEN_FDS"); n != "1" {
		return nil, fmt.Errorf("socket activation: LISTEN_FDS is %q, want exactly one socket", n)
	}
	// Children must not take the socket for theirs.
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		_ = os.Unsetenv(k)
	}
	f := os.NewFile(3, "activated socket")
	ln, err := net.FileListener(f)
	_ = f.Close() // ln holds its own copy
	if err != nil {
		return nil, fmt.Errorf("socket activation: fd 3: %w", err)
	}
	return ln, nil
}
