package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/logging"
)

// ErrorDomain marks errors the gateway itself raises (ErrorInfo.domain).
const ErrorDomain = "gateway.bmcis"

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	// Code is a stable upper-case name: the ErrorInfo reason when the status
	// carries one (AUTH_REQUIRED, RATE_LIMIT, VENDOR_NOT_FOUND, ...), else the
	// gRPC code name (NOT_FOUND, INVALID_ARGUMENT, ...).
	Code string `json:"code"`
	// Message is fit for the caller; internals never reach it.
	Message string `json:"message"`
	// Details are the status details as JSON objects, each with "@type";
	// never null.
	Details []json.RawMessage `json:"details"`
}

// HTTPStatus maps every gRPC code to the HTTP status the gateway answers with.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // client closed request
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	default: // Unknown, Internal, DataLoss and anything new
		return http.StatusInternalServerError
	}
}

// CodeName is the canonical upper-case name of a gRPC code ("NOT_FOUND").
func CodeName(c codes.Code) string {
	if n, ok := code.Code_name[int32(c)]; ok {
		return n
	}
	return "UNKNOWN"
}

// newError builds a status raised by the gateway itself, with an ErrorInfo
// detail carrying reason, and any further details.
func newError(c codes.Code, reason, msg string, meta map[string]string, more ...*anypb.Any) *status.Status {
	p := status.New(c, msg).Proto()
	if info, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}); err == nil {
		p.Details = append(p.Details, info)
	}
	p.Details = append(p.Details, more...)
	return status.FromProto(p)
}

func retryInfo(seconds int64) *anypb.Any {
	a, _ := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(secondsDuration(seconds))})
	return a
}

// errTooLarge marks a request whose body passed the size limit; the body
// reader records it in the request context so the error handler answers 413
// whatever the decoder made of it.
type bodyState struct {
	tooLarge bool
	limit    int64 // the body limit of the request's route
}

type bodyStateKey struct{}

func bodyStateFrom(ctx context.Context) *bodyState {
	s, _ := ctx.Value(bodyStateKey{}).(*bodyState)
	return s
}

// handleError is the gateway's one error handler: gRPC errors from the
// services, the gateway's own refusals (auth, size, routing) and panics all
// become {code, message, details} with the status HTTPStatus gives, plus
// Retry-After when the status says when to retry.
func (g *Gateway) handleError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	httpStatus := 0
	var hse *runtime.HTTPStatusError
	if errors.As(err, &hse) {
		httpStatus = hse.HTTPStatus
		err = hse.Err
	}
	st := status.Convert(err)
	if bs := bodyStateFrom(r.Context()); bs != nil && bs.tooLarge {
		st = newError(codes.InvalidArgument, "REQUEST_TOO_LARGE",
			"request body is larger than "+strconv.FormatInt(bs.limit, 10)+" bytes", nil)
		httpStatus = http.StatusRequestEntityTooLarge
	}
	st = g.sanitize(ctx, r, st)
	if httpStatus == 0 {
		httpStatus = HTTPStatus(st.Code())
	}

	body := ErrorBody{Code: CodeName(st.Code()), Message: st.Message(), Details: []json.RawMessage{}}
	var retryAfter int64 = -1
	for _, d := range st.Proto().GetDetails() {
		b, merr := protojson.Marshal(d)
		if merr != nil { // a detail type this binary does not know
			b, _ = json.Marshal(map[string]string{"@type": d.GetTypeUrl()})
		}
		body.Details = append(body.Details, b)
		msg, uerr := d.UnmarshalNew()
		if uerr != nil {
			continue
		}
		switch m := msg.(type) {
		case *errdetails.ErrorInfo:
			if m.GetReason() != "" {
				body.Code = m.GetReason()
			}
		case *errdetails.RetryInfo:
			retryAfter = int64(math.Ceil(m.GetRetryDelay().AsDuration().Seconds()))
		case *vendorgraphv1.VendorNotFoundDetail:
			body.Code = "VENDOR_NOT_FOUND"
		case *vendorgraphv1.VendorAmbiguousDetail:
			body.Code = "VENDOR_AMBIGUOUS"
		}
	}
	if rt, ok := routeOf(r); ok && rt.Access == Admin && body.Code == CodeName(st.Code()) &&
		(st.Code() == codes.Unauthenticated || st.Code() == codes.PermissionDenied) {
		// An admin route's refusal reads the same whoever refused it: the
		// gateway (no credential) or the service the credential reached.
		body.Code = "ADMIN_TOKEN_INVALID"
		if strings.TrimSpace(r.Header.Get(HeaderAdminToken)) == "" && r.Context().Value(adminTokenKey{}) == nil {
			body.Code = "ADMIN_TOKEN_REQUIRED"
		}
		g.metrics.denials.WithLabelValues(body.Code).Inc()
	}
	if retryAfter < 0 && (st.Code() == codes.ResourceExhausted || st.Code() == codes.Unavailable) {
		// Both are transient by definition (a tier refilling, a dependency
		// or replica coming back); a client that honours Retry-After backs
		// off instead of hammering or giving up.
		retryAfter = 1
	}
	if retryAfter >= 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(max(retryAfter, 1), 10))
	}
	if st.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="bmcis"`)
	}
	writeJSON(w, httpStatus, body)
	if rec := recorderFrom(r.Context()); rec != nil {
		rec.code = body.Code
	}
}

// sanitize keeps connection internals (addresses, dial errors) out of
// messages: a transport failure on the way to a service reads as that
// service being unavailable, and the details go to the log.
func (g *Gateway) sanitize(ctx context.Context, r *http.Request, st *status.Status) *status.Status {
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if strings.Contains(msg, "connection error") || strings.Contains(msg, "transport") ||
			strings.Contains(msg, "dial") || strings.Contains(msg, "connect:") || strings.Contains(msg, "name resolver") {
			svc := "upstream"
			if rt, ok := routeOf(r); ok {
				svc = rt.Service
			}
			logging.FromContext(ctx).WarnContext(ctx, "upstream unavailable", "service", svc, "error", msg)
			p := st.Proto()
			p.Message = svc + " service unavailable"
			return status.FromProto(p)
		}
	case codes.Unknown:
		// A non-status error (a proxy's HTML page, a broken stream): say less.
		logging.FromContext(ctx).WarnContext(ctx, "unknown upstream error", "error", msg)
		return status.New(codes.Unknown, "unknown error (request id "+logging.RequestID(ctx)+")")
	}
	return st
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, httpStatus int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpStatus = http.StatusInternalServerError
		b = []byte(`{"code":"INTERNAL","message":"failed to encode response","details":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(append(b, '\n'))
}

// handleRoutingError turns grpc-gateway's routing failures (no route, wrong
// method, bad path) into statuses for handleError.
func (g *Gateway) handleRoutingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	var st *status.Status
	switch httpStatus {
	case http.StatusNotFound:
		st = newError(codes.NotFound, "ROUTE_NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path, nil)
	case http.StatusMethodNotAllowed:
		st = newError(codes.Unimplemented, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path, nil)
	default:
		st = newError(codes.InvalidArgument, "BAD_REQUEST", http.StatusText(httpStatus), nil)
	}
	g.handleError(ctx, mux, m, w, r, &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: st.Err()})
}
