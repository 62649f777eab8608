// Package logging sets up structured JSON logs and carries the request id and
// a request-scoped logger through a context. A line logged inside a traced
// call carries its trace_id and span_id (OpenTelemetry, platform/tracing).
package logging

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"strings"
)

// New returns a JSON logger at level ("debug", "info", "warn", "error") that
// tags every line with the service name.
func New(w io.Writer, service, level string) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	return slog.New(traceHandler{next: h}).With("service", service)
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// NewRequestID returns a random id such as "req_048207316529481": 15
// decimal digits (about 50 random bits). Every MCP answer carries its id
// twice, and cl100k reads digits three at a time, so this spends 5 tokens
// where 16 hex digits spent 10; 50 bits keep ids unique enough to find one
// request's log lines.
func NewRequestID() string {
	n, _ := rand.Int(rand.Reader, requestIDSpace) // crypto/rand never fails on Linux
	return fmt.Sprintf("req_%015d", n)
}

// requestIDSpace is 10^15, the number of distinct request ids.
var requestIDSpace = big.NewInt(1_000_000_000_000_000)

// WithRequestID stores a request id in ctx.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the request id stored in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithLogger stores a request-scoped logger in ctx.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// FromContext returns the logger stored in ctx, or slog.Default(). Its
// lines carry ctx's trace and span ids even when logged without a context.
func FromContext(ctx context.Context) *slog.Logger {
	l, ok := ctx.Value(loggerKey).(*slog.Logger)
	if !ok {
		l = slog.Default()
	}
	return bindSpan(l, ctx)
}
