package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

const (
	// RequestIDHeader carries a caller's request id; the server echoes it
	// (or the one it made up) in the response header.
	RequestIDHeader = grpcclient.RequestIDHeader
	// ServiceTokenHeader carries the caller's service credential.
	ServiceTokenHeader = grpcclient.ServiceTokenHeader
)

// slowFailure is how long an UNAVAILABLE answer may take and still be
// worth a client's retry (platform/grpcclient retries UNAVAILABLE).
const slowFailure = 500 * time.Millisecond

// retryPushbackHeader is gRPC's server pushback: a negative value tells the
// client not to retry.
const retryPushbackHeader = "grpc-retry-pushback-ms"

// exempt reports whether a method skips the credential check: health checks
// and reflection must work for probes and for grpcurl without secrets.
func exempt(fullMethod string) bool { return rpcauth.Exempt(fullMethod) }

type metrics struct {
	handled *prometheus.CounterVec
	latency *prometheus.HistogramVec
	panics  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, service string) *metrics {
	m := &metrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "bmcis_grpc_server_handled_total",
			Help:        "RPCs completed, by method and status code.",
			ConstLabels: prometheus.Labels{"service": service},
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "bmcis_grpc_server_handling_seconds",
			Help:        "RPC latency, by method.",
			ConstLabels: prometheus.Labels{"service": service},
			Buckets:     []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "bmcis_grpc_server_panics_total",
			Help:        "Handler panics recovered.",
			ConstLabels: prometheus.Labels{"service": service},
		}),
	}
	reg.MustRegister(m.handled, m.latency, m.panics)
	return m
}

// edge is the one interceptor every call passes through. In order, it: sets
// the request id and a request-scoped logger; checks the service token;
// recovers panics; maps the handler's error to a status; records metrics and
// one log line.
type edge struct {
	log      *slog.Logger
	access   *rpcauth.Verifier
	classify Classifier
	metrics  *metrics
}

func (e *edge) begin(ctx context.Context, method string) (context.Context, string) {
	md, _ := metadata.FromIncomingContext(ctx)
	id := ""
	if vals := md.Get(RequestIDHeader); len(vals) > 0 && validRequestID(vals[0]) {
		id = vals[0]
	}
	if id == "" {
		id = logging.NewRequestID()
	}
	log := e.log.With("request_id", id, "method", method)
	ctx = logging.WithRequestID(ctx, id)
	ctx = logging.WithLogger(ctx, log)
	return ctx, id
}

// validRequestID keeps caller-supplied ids short and printable so they cannot
// forge log lines.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// authorize applies rpcauth's table to the caller's credential and puts
// the credential's roles in the context, for the claims a handler checks
// (rpcauth.MayClaim).
func (e *edge) authorize(ctx context.Context, method string) (context.Context, error) {
	if !e.access.Enabled() {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	cred := ""
	if vals := md.Get(ServiceTokenHeader); len(vals) == 1 {
		cred = vals[0]
	}
	roles, err := e.access.AuthorizeRoles(method, cred)
	var forbidden *rpcauth.ForbiddenError
	switch {
	case err == nil:
		return rpcauth.WithRoles(ctx, roles), nil
	case errors.Is(err, rpcauth.ErrMissing):
		return ctx, status.Error(codes.Unauthenticated, "missing service credential ("+ServiceTokenHeader+" metadata)")
	case errors.Is(err, rpcauth.ErrUnknown):
		return ctx, status.Error(codes.Unauthenticated, "invalid service credential")
	case errors.As(err, &forbidden):
		return ctx, status.Error(codes.PermissionDenied, forbidden.Error())
	default:
		return ctx, status.Error(codes.PermissionDenied, "no access rule allows "+method)
	}
}

func (e *edge) finish(ctx context.Context, method, requestID string, start time.Time, err error) error {
	err = toStatus(ctx, err, e.classify, logging.FromContext(ctx), requestID)
	code := status.Code(err)
	elapsed := time.Since(start)
	e.metrics.handled.WithLabelValues(method, code.String()).Inc()
	e.metrics.latency.WithLabelValues(method).Observe(elapsed.Seconds())
	if !exempt(method) {
		logging.FromContext(ctx).LogAttrs(ctx, levelFor(code), "rpc",
			slog.String("code", code.String()),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000))
	}
	return err
}

func levelFor(c codes.Code) slog.Level {
	switch c {
	case codes.OK, codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition,
		codes.AlreadyExists, codes.Canceled, codes.Unauthenticated, codes.PermissionDenied:
		return slog.LevelInfo
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return slog.LevelError
	default:
		return slog.LevelWarn
	}
}

func (e *edge) recovered(ctx context.Context, p any) error {
	e.metrics.panics.Inc()
	logging.FromContext(ctx).ErrorContext(ctx, "panic in handler",
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return fmt.Errorf("panic: %v", p)
}

func (e *edge) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	ctx, id := e.begin(ctx, info.FullMethod)
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, e.recovered(ctx, p)
		}
		err = e.finish(ctx, info.FullMethod, id, start, err)
		// The request id goes back in the header of a reply, but in the
		// trailer of a failure: a failure with a header is not
		// "trailers-only", and clients then take it as committed and never
		// retry it, so a brief UNAVAILABLE would reach every caller.
		switch {
		case err == nil:
			_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
		case status.Code(err) == codes.Unavailable && time.Since(start) > slowFailure:
			// A failure that already made the caller wait (a database that
			// stopped answering) is not retried: three attempts would triple
			// the wait instead of answering fast.
			_ = grpc.SetTrailer(ctx, metadata.Pairs(RequestIDHeader, id, retryPushbackHeader, "-1"))
		default:
			_ = grpc.SetTrailer(ctx, metadata.Pairs(RequestIDHeader, id))
		}
	}()
	ctx, err = e.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

func (e *edge) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	ctx, id := e.begin(ss.Context(), info.FullMethod)
	_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, id))
	defer func() {
		if p := recover(); p != nil {
			err = e.recovered(ctx, p)
		}
		err = e.finish(ctx, info.FullMethod, id, start, err)
	}()
	ctx, err = e.authorize(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
}
