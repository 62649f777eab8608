package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Classifier turns a known internal error into the status callers should see
// (for example a lost database connection into UNAVAILABLE). It returns false
// for errors it does not recognise.
type Classifier func(error) (*status.Status, bool)

// InvalidArgument returns an INVALID_ARGUMENT error naming the offending field,
// with a BadRequest detail so clients can point at it.
func InvalidArgument(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	st := status.New(codes.InvalidArgument, field+": "+msg)
	if withDetail, err := st.WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}},
	}); err == nil {
		st = withDetail
	}
	return st.Err()
}

// toStatus is the single place where handler errors become what callers see.
// Errors that already carry a deliberate status pass through, except INTERNAL
// and UNKNOWN, whose text may hold internals; anything unrecognised is logged
// with the request id and answered with a generic INTERNAL.
func toStatus(ctx context.Context, err error, classify Classifier, log *slog.Logger, requestID string) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown && st.Code() != codes.Internal {
		return st.Err()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	}
	if classify != nil {
		if st, ok := classify(err); ok {
			log.WarnContext(ctx, "request failed", "error", err.Error(), "code", st.Code().String())
			return st.Err()
		}
	}
	log.ErrorContext(ctx, "internal error", "error", err.Error())
	return status.Errorf(codes.Internal, "internal error (request id %s)", requestID)
}
