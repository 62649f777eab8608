// Package apierror is the gateway's error vocabulary: the {code, message,
// details} body every failure answers with, the one gRPC-code-to-HTTP table,
// and the statuses the gateway raises itself. The handler that writes them
// is the REST edge's (rest.Edge.WriteError).
package apierror

import (
	"encoding/json"
	"net/http"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Domain marks errors the gateway itself raises (ErrorInfo.domain).
const Domain = "gateway.bmcis"

// Body is the JSON body of every error response.
type Body struct {
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

// New builds a status raised by the gateway itself, with an ErrorInfo
// detail carrying reason, and any further details.
func New(c codes.Code, reason, msg string, meta map[string]string, more ...*anypb.Any) *status.Status {
	p := status.New(c, msg).Proto()
	if info, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: meta}); err == nil {
		p.Details = append(p.Details, info)
	}
	p.Details = append(p.Details, more...)
	return status.FromProto(p)
}

// RetryInfo is the detail that becomes Retry-After: seconds.
func RetryInfo(seconds int64) *anypb.Any {
	a, _ := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(seconds) * time.Second)})
	return a
}
