package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/origin"
)

// recorder follows one request through the middleware chain: what route it
// took, who called, how it ended. It feeds the access log and metrics.
type recorder struct {
	route  string // route template, or "other"
	rt     *Route // the REST route, when one matched
	keyID  string
	code   string // error code of an error response
	status int
	// What the audit entry of a read says (audit.go).
	query       string
	target      string // what was asked for, when not the path (audit.go)
	chunkIDs    []int64
	documentIDs []string
}

type recorderKey struct{}

func recorderFrom(ctx context.Context) *recorder {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	return r
}

// routeOf returns the REST route a request matched, if any.
func routeOf(r *http.Request) (Route, bool) {
	if rec := recorderFrom(r.Context()); rec != nil && rec.rt != nil {
		return *rec.rt, true
	}
	return Route{}, false
}

// statusWriter captures the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// validRequestID keeps caller-supplied ids short and printable, as the
// services do, so they cannot forge log lines.
func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// outer is the first middleware: request id (taken from X-Request-Id or made
// up, echoed, passed to every gRPC call), panic recovery, one access log line
// and the gateway's own metrics.
func (e *Edge) outer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = logging.NewRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		rec := &recorder{route: "other"}
		log := e.log.With("request_id", id)
		ctx := logging.WithRequestID(r.Context(), id)
		ctx = logging.WithLogger(ctx, log)
		ctx = context.WithValue(ctx, recorderKey{}, rec)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		e.inflight.Add(1)
		defer func() {
			e.inflight.Add(-1)
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(ctx, "panic in handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.status == 0 {
					e.handleError(ctx, e.rest, nil, sw, r, apierror.New(codes.Internal, "INTERNAL",
						"internal error (request id "+id+")", nil).Err())
				}
			}
			if sw.status == 0 {
				sw.status = http.StatusOK
			}
			e.audit(r, rec, sw.status, start, id)
			elapsed := time.Since(start)
			e.metrics.Requests.WithLabelValues(rec.route, strconv.Itoa(sw.status)).Inc()
			e.metrics.Latency.WithLabelValues(rec.route).Observe(elapsed.Seconds())
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("route", rec.route),
				slog.Int("status", sw.status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			}
			if rec.keyID != "" {
				attrs = append(attrs, slog.String("key_id", rec.keyID))
			}
			if rec.code != "" {
				attrs = append(attrs, slog.String("code", rec.code))
			}
			lvl := slog.LevelInfo
			switch {
			case sw.status >= 500:
				lvl = slog.LevelWarn
			case rec.route == "GET /api/health" || rec.route == "GET /healthz" || strings.HasPrefix(rec.route, "GET /assets"):
				lvl = slog.LevelDebug
			}
			log.LogAttrs(ctx, lvl, "http", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

// security sets headers every response carries, a request deadline and the
// body size limit.
func (e *Edge) security(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// Answers hold the caller's data (chunks, keys, the audit trail);
		// the page, its files and /openapi.json replace it with no-cache.
		h.Set("Cache-Control", "no-store")
		limit := e.cfg.MaxBodyBytes
		if r.Method == http.MethodPost && isUploadPath(r.URL.Path) {
			limit = e.cfg.MaxUploadBytes
		}
		if r.ContentLength > limit {
			bs := &bodyState{tooLarge: true, limit: limit}
			r = r.WithContext(context.WithValue(r.Context(), bodyStateKey{}, bs))
			e.WriteError(w, r, errors.New("request too large"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), e.cfg.RequestTimeout)
		defer cancel()
		bs := &bodyState{limit: limit}
		ctx = context.WithValue(ctx, bodyStateKey{}, bs)
		r = r.WithContext(ctx)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &limitedBody{rc: http.MaxBytesReader(w, r.Body, limit), state: bs}
		}
		next.ServeHTTP(w, r)
	})
}

// limitedBody notes when http.MaxBytesReader cut a body short.
type limitedBody struct {
	rc    io.ReadCloser
	state *bodyState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		b.state.tooLarge = true
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// CORS headers.
const (
	corsAllowMethods = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders = "Content-Type, X-API-Key, Authorization, X-Admin-Token, X-Request-Id"
	corsExpose       = "X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
	corsMaxAge       = "600"
)

// cors refuses a browser Origin that is not allowed (403, every route: a
// page must not drive the API with a key it does not hold) and labels
// responses for the CORS origins. Allowed are BMCIS_GATEWAY_CORS_ORIGINS,
// BMCIS_GATEWAY_ALLOWED_ORIGINS and the listener's own loopback origins; no
// Origin (curl, SDKs) passes. CORS headers go to BMCIS_GATEWAY_CORS_ORIGINS
// only; "*" works only when configured explicitly. Credentials (cookies)
// are never allowed: the API authenticates with headers.
func (e *Edge) cors(next http.Handler) http.Handler {
	wildcard := slices.Contains(e.cfg.CORSOrigins, "*")
	policy := origin.New(e.cfg.Addr, append(slices.Clone(e.cfg.CORSOrigins), e.cfg.AllowedOrigins...)...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := r.Header.Get("Origin")
		if from == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !policy.AllowsRequest(r) {
			e.WriteError(w, r, apierror.New(codes.PermissionDenied, "ORIGIN_NOT_ALLOWED", "origin "+from+" is not allowed", nil).Err())
			return
		}
		w.Header().Add("Vary", "Origin")
		allowed := wildcard || slices.Contains(e.cfg.CORSOrigins, from)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if !allowed {
			if preflight {
				if rec := recorderFrom(r.Context()); rec != nil {
					rec.route = "OPTIONS *"
				}
				e.WriteError(w, r, apierror.New(codes.PermissionDenied, "CORS_ORIGIN_NOT_ALLOWED", "origin "+from+" is not allowed", nil).Err())
				return
			}
			next.ServeHTTP(w, r) // no CORS headers: the browser keeps the response from the page
			return
		}
		if wildcard {
			w.Header().Set("Access-Control-Allow-Origin", "*")
		} else {
			w.Header().Set("Access-Control-Allow-Origin", from)
		}
		w.Header().Set("Access-Control-Expose-Headers", corsExpose)
		if preflight {
			if rec := recorderFrom(r.Context()); rec != nil {
				rec.route = "OPTIONS *"
			}
			w.Header().Add("Vary", "Access-Control-Request-Method")
			w.Header().Add("Vary", "Access-Control-Request-Headers")
			w.Header().Set("Access-Control-Allow-Methods", corsAllowMethods)
			w.Header().Set("Access-Control-Allow-Headers", corsAllowHeaders)
			w.Header().Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
