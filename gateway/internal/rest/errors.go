package rest

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/httpjson"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/logging"
)

// bodyState marks a request whose body passed the size limit; the body
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
// become {code, message, details} with the status apierror.HTTPStatus gives, plus
// Retry-After when the status says when to retry.
func (e *Edge) handleError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	httpStatus := 0
	var hse *runtime.HTTPStatusError
	if errors.As(err, &hse) {
		httpStatus = hse.HTTPStatus
		err = hse.Err
	}
	st := status.Convert(err)
	if bs := bodyStateFrom(r.Context()); bs != nil && bs.tooLarge {
		st = apierror.New(codes.InvalidArgument, "REQUEST_TOO_LARGE",
			"request body is larger than "+strconv.FormatInt(bs.limit, 10)+" bytes", nil)
		httpStatus = http.StatusRequestEntityTooLarge
	}
	st = e.sanitize(ctx, r, st)
	if httpStatus == 0 {
		httpStatus = apierror.HTTPStatus(st.Code())
	}

	body := apierror.Body{Code: apierror.CodeName(st.Code()), Message: st.Message(), Details: []json.RawMessage{}}
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
	if rt, ok := routeOf(r); ok && rt.Access == Admin && body.Code == apierror.CodeName(st.Code()) &&
		(st.Code() == codes.Unauthenticated || st.Code() == codes.PermissionDenied) {
		// An admin route's refusal reads the same whoever refused it: the
		// gateway (no credential) or the service the credential reached.
		body.Code = "ADMIN_TOKEN_INVALID"
		if strings.TrimSpace(r.Header.Get(HeaderAdminToken)) == "" && r.Context().Value(adminTokenKey{}) == nil {
			body.Code = "ADMIN_TOKEN_REQUIRED"
		} else {
			body.Message += "; this route takes " + operatorCredential(r) + " in " + HeaderAdminToken
		}
		e.metrics.Denials.WithLabelValues(body.Code).Inc()
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
	httpjson.Write(w, httpStatus, body)
	if rec := recorderFrom(r.Context()); rec != nil {
		rec.code = body.Code
	}
}

// sanitize keeps connection internals (addresses, dial errors) out of
// messages: a transport failure on the way to a service reads as that
// service being unavailable, and the details go to the log.
func (e *Edge) sanitize(ctx context.Context, r *http.Request, st *status.Status) *status.Status {
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

// handleRoutingError turns grpc-gateway's routing failures (no route, wrong
// method, bad path) into statuses for handleError.
func (e *Edge) handleRoutingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	var st *status.Status
	switch httpStatus {
	case http.StatusNotFound:
		st = apierror.New(codes.NotFound, "ROUTE_NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path, nil)
	case http.StatusMethodNotAllowed:
		st = apierror.New(codes.Unimplemented, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path, nil)
	default:
		st = apierror.New(codes.InvalidArgument, "BAD_REQUEST", http.StatusText(httpStatus), nil)
	}
	e.handleError(ctx, mux, m, w, r, &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: st.Err()})
}
