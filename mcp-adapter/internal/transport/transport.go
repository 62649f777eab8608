// Package transport serves the MCP server over stdio (Claude Desktop starts
// the binary) or streamable HTTP (remote clients; stateless, so any replica
// answers any request).
package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// StdioKeyHint tells a stdio user how to supply a key.
const StdioKeyHint = "Set BMCIS_API_KEY in the env of the bmcis-knowledge server in the Claude Desktop configuration, then restart Claude Desktop."

// HTTPKeyHint tells an HTTP client how to supply a key.
const HTTPKeyHint = "Send the API key in the X-API-Key header or as Authorization: Bearer <key>."

// ServeStdio serves one client on in/out until in closes or ctx ends.
func ServeStdio(ctx context.Context, m *server.MCPServer, in io.Reader, out io.Writer, logger *slog.Logger) error {
	s := server.NewStdioServer(m)
	s.SetErrorLogger(log.New(slogWriter{logger}, "", 0))
	err := s.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
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

// HTTPHandler routes /mcp to the streamable HTTP server, /healthz to a
// liveness probe and /readyz to a readiness probe that asks each backend's
// gRPC health service.
func HTTPHandler(m *server.MCPServer, clients *backend.Clients, logger *slog.Logger) http.Handler {
	mcpHTTP := server.NewStreamableHTTPServer(m,
		server.WithStateLess(true),
		server.WithStreamableHTTPLogger(logger),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return tools.WithAPIKey(ctx, APIKey(r.Header))
		}),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHTTP)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP listens on addr until ctx ends, then shuts down gracefully.
func ServeHTTP(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", "addr", ln.Addr().String(), "endpoint", "/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
