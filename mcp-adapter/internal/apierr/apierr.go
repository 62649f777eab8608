// Package apierr defines the error codes tool answers carry, their messages,
// and the mapping from backend (gRPC) failures to them.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
)

// Code is an error code of the contract.
type Code string

// Error codes.
const (
	AuthRequired       Code = "AUTH_REQUIRED"
	AuthInvalid        Code = "AUTH_INVALID"
	RateLimit          Code = "RATE_LIMIT"
	VendorNotFound     Code = "VENDOR_NOT_FOUND"
	VendorAmbiguous    Code = "VENDOR_AMBIGUOUS"
	QueryTooLong       Code = "QUERY_TOO_LONG"
	InvalidParams      Code = "INVALID_PARAMS"
	InvalidFields      Code = "INVALID_FIELDS"
	InvalidCursor      Code = "INVALID_CURSOR"
	TokenLimitExceeded Code = "TOKEN_LIMIT_EXCEEDED"
	DBConnection       Code = "DB_CONNECTION"
	SearchFailed       Code = "SEARCH_FAILED"
	ServiceUnavailable Code = "SERVICE_UNAVAILABLE"
)

// AllCodes lists every code, for documentation and tests.
var AllCodes = []Code{
	AuthRequired, AuthInvalid, RateLimit, VendorNotFound, VendorAmbiguous,
	QueryTooLong, InvalidParams, InvalidFields, InvalidCursor,
	TokenLimitExceeded, DBConnection, SearchFailed, ServiceUnavailable,
}

// Error is a failed tool call, ready to become an envelope's error member.
type Error struct {
	Code       Code
	Message    string
	Retryable  bool
	Suggestion string
	Details    map[string]any
	// StatusMessage overrides _metadata.message (defaults to Message).
	StatusMessage string

	allowedFields  []string
	suggestions    []string
	remaining      *envelope.Remaining
	resetInSeconds *int
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Envelope returns the envelope error member.
func (e *Error) Envelope() *envelope.Error {
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	return &envelope.Error{
		Code:           string(e.Code),
		Message:        e.Message,
		Retryable:      e.Retryable,
		Suggestion:     envelope.Ptr(e.Suggestion),
		Details:        details,
		AllowedFields:  e.allowedFields,
		Suggestions:    e.suggestions,
		Remaining:      e.remaining,
		ResetInSeconds: e.resetInSeconds,
	}
}

// As returns err as an *Error when it is one.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

func newErr(code Code, retryable bool, msg, suggestion string) *Error {
	return &Error{Code: code, Message: msg, Retryable: retryable, Suggestion: suggestion}
}

// NewAuthRequired is the answer to a call that carries no API key. How to
// supply one depends on the transport.
func NewAuthRequired(howToSupply string) *Error {
	return newErr(AuthRequired, false,
		"Authentication required. API key must be provided.", howToSupply)
}

// The reasons NewAuthInvalid takes (details.reason of the answer).
const (
	ReasonInvalid = "AUTH_INVALID"
	ReasonExpired = "AUTH_EXPIRED"
	ReasonRevoked = "AUTH_REVOKED"
)

// NewAuthInvalid is the answer to a wrong, expired or revoked key; reason is
// the auth service's denial reason. The contract fixes the message for all
// three; the suggestion, which the markdown shows beside it, says which
// one, so a user whose key was revoked or expired is not sent to check it.
func NewAuthInvalid(reason, serviceMessage string) *Error {
	suggestion := "Verify the API key with your BMCIS administrator, or request a new one."
	switch reason {
	case ReasonRevoked:
		suggestion = "This API key has been revoked and cannot be used again; ask your BMCIS administrator for a new key."
	case ReasonExpired:
		suggestion = "This API key has expired; ask your BMCIS administrator for a new key, or to rotate this one."
	}
	e := newErr(AuthInvalid, false, "Invalid API key. Please check your credentials.", suggestion)
	e.Details = map[string]any{"reason": reason}
	if serviceMessage != "" {
		e.Details["auth_message"] = serviceMessage
	}
	return e
}

// NewToolNotAllowed is the answer to a key limited to other tools. The
// contract has no code of its own for it: it is an AUTH_INVALID whose
// message and details say which tools the key may use.
func NewToolNotAllowed(tool string, allowed []string) *Error {
	may := "; it may use: " + strings.Join(allowed, ", ")
	if len(allowed) == 0 { // auth named none
		may = ""
	}
	e := newErr(AuthInvalid, false,
		fmt.Sprintf("This API key may not use %s%s.", tool, may),
		"Use one of the tools this key may use, or ask your BMCIS administrator for a key that includes "+tool+".")
	e.Details = map[string]any{"reason": "TOOL_NOT_ALLOWED", "tool": tool, "allowed_tools": allowed}
	return e
}

// NewRateLimit is the answer to a call over a rate-limit tier.
func NewRateLimit(remaining envelope.Remaining, resetInSeconds int) *Error {
	e := newErr(RateLimit, true, "Rate limit exceeded",
		fmt.Sprintf("Wait %d seconds before calling again.", resetInSeconds))
	e.remaining = &remaining
	e.resetInSeconds = &resetInSeconds
	e.Details = map[string]any{
		"remaining":        remaining,
		"reset_in_seconds": resetInSeconds,
	}
	return e
}

// NewAuthThrottled is the answer when the caller's address made too many
// failed key checks lately: the contract has no code of its own for it, so
// it is a retryable RATE_LIMIT whose details say why (reason
// AUTH_THROTTLED); no key quota was spent.
func NewAuthThrottled(resetInSeconds int, serviceMessage string) *Error {
	resetInSeconds = max(resetInSeconds, 1)
	e := newErr(RateLimit, true, "Too many failed API key checks from your address",
		fmt.Sprintf("Check the API key, then wait %d seconds before calling again.", resetInSeconds))
	e.resetInSeconds = &resetInSeconds
	e.Details = map[string]any{"reason": "AUTH_THROTTLED", "reset_in_seconds": resetInSeconds}
	if serviceMessage != "" {
		e.Details["auth_message"] = serviceMessage
	}
	return e
}

// NewQueryTooLong is the answer to a query over max characters.
func NewQueryTooLong(length, max int) *Error {
	e := newErr(QueryTooLong, false,
		fmt.Sprintf("Invalid request parameters: query exceeds %d characters", max),
		"Shorten the query to its key terms.")
	e.Details = map[string]any{"length": length, "max_length": max}
	return e
}

// NewInvalidParams is the answer to a parameter that fails validation.
func NewInvalidParams(param, problem, suggestion string) *Error {
	e := newErr(InvalidParams, false, "Invalid request parameters: "+param+" "+problem, suggestion)
	e.Details = map[string]any{"parameter": param}
	return e
}

// NewInvalidFields is the answer to fields outside the mode's whitelist:
// invalid are the names quoted, more how many other invalid names there
// were.
func NewInvalidFields(invalid []string, more int, mode string, allowed []string) *Error {
	quoted := make([]string, len(invalid))
	for i, f := range invalid {
		quoted[i] = "'" + f + "'"
	}
	andMore := ""
	if more > 0 {
		andMore = fmt.Sprintf(" and %d more", more)
	}
	e := newErr(InvalidFields, false,
		fmt.Sprintf("Fields [%s]%s not available in '%s' mode", strings.Join(quoted, ", "), andMore, mode),
		"Request only fields from allowed_fields, or choose a richer response_mode.")
	e.StatusMessage = "Invalid fields for response_mode"
	e.allowedFields = allowed
	e.Details = map[string]any{"invalid_fields": invalid, "response_mode": mode, "allowed_fields": allowed}
	if more > 0 {
		e.Details["more_invalid_fields"] = more
	}
	return e
}

// NewInvalidCursor is the answer to a cursor that is malformed, tampered
// with, or issued for another query.
func NewInvalidCursor(reason string) *Error {
	e := newErr(InvalidCursor, false, "Invalid pagination cursor: "+reason,
		"Repeat the search without a cursor to start again from the first page, and pass back the cursor of the latest answer unchanged with the same query.")
	e.Details = map[string]any{"reason": reason}
	return e
}

// NewTokenLimitExceeded is the answer when not even one result fits.
func NewTokenLimitExceeded(needed, limit int, suggestion string) *Error {
	e := newErr(TokenLimitExceeded, false,
		fmt.Sprintf("Response would use %d tokens, limit is %d", needed, limit), suggestion)
	e.StatusMessage = "Token limit exceeded for requested response mode"
	e.Details = map[string]any{"tokens_needed": needed, "max_tokens": limit}
	return e
}

// NewVendorNotFound is the answer to an unknown vendor name.
func NewVendorNotFound(name string, suggestions []string) *Error {
	e := newErr(VendorNotFound, false,
		fmt.Sprintf("Vendor '%s' not found. Try using semantic_search first to find exact vendor names.", name),
		fmt.Sprintf("semantic_search('%s vendors')", name))
	if len(suggestions) > 0 {
		e.Suggestion = "Did you mean: " + strings.Join(suggestions, ", ") + "? Or " + e.Suggestion
	}
	e.suggestions = nonNil(suggestions)
	e.Details = map[string]any{"vendor_name": name, "suggestions": nonNil(suggestions)}
	return e
}

// NewVendorAmbiguous is the answer to a name that matches several vendors.
func NewVendorAmbiguous(name string, candidates []string) *Error {
	quoted := make([]string, len(candidates))
	for i, c := range candidates {
		quoted[i] = "'" + c + "'"
	}
	e := newErr(VendorAmbiguous, false,
		fmt.Sprintf("Ambiguous vendor name. Multiple matches found: [%s]. Please use full vendor name or a more specific term.", strings.Join(quoted, ", ")),
		"Please use full vendor name or a more specific term.")
	e.suggestions = nonNil(candidates)
	e.Details = map[string]any{"vendor_name": name, "candidates": nonNil(candidates)}
	return e
}

// NewServiceUnavailable is the answer when a backend cannot be reached in
// time. retryable is false only for permanent conditions.
func NewServiceUnavailable(service, why string, retryable bool) *Error {
	suggestion := retrySuggestion(service, "a few seconds")
	if !retryable {
		suggestion = "Contact the BMCIS administrator; retrying will not help."
	}
	e := newErr(ServiceUnavailable, retryable,
		fmt.Sprintf("The %s service is unavailable: %s", service, why), suggestion)
	e.Details = map[string]any{"service": service}
	return e
}

// WithRetryAfter makes a retryable answer say when to retry (a server's
// Retry-After, in seconds), in reset_in_seconds as RATE_LIMIT does.
func (e *Error) WithRetryAfter(seconds int) *Error {
	seconds = max(seconds, 1)
	e.resetInSeconds = &seconds
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details["reset_in_seconds"] = seconds
	service, _ := e.Details["service"].(string)
	e.Suggestion = retrySuggestion(service, fmt.Sprintf("%d seconds", seconds))
	return e
}

// retrySuggestion says when to retry and what works meanwhile: search and
// vendorgraph each serve only some tools, while every call needs auth and
// (through the Desktop bridge) the endpoint; another failure (the
// adapter's own, for one answer) says nothing of the other tools.
func retrySuggestion(service, when string) string {
	switch Service(service) {
	case Search, VendorGraph:
		return "Retry in " + when + "; other tools keep working."
	case Auth, Endpoint:
		return "Retry in " + when + "; no tool can answer until it is back."
	}
	return "Retry in " + when + "."
}

// NewAccessRefused is the answer when the remote endpoint, or a proxy in
// front of it, refuses a request at the HTTP level (401, 403) before any
// key check of the product's own, whose denials are envelopes: an
// AUTH_INVALID whose details give the reason (HTTP_401, HTTP_403).
func NewAccessRefused(reason, message, suggestion string) *Error {
	e := newErr(AuthInvalid, false, message, suggestion)
	e.Details = map[string]any{"reason": reason}
	return e
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Service names a backend, for messages and mapping.
type Service string

// Backends.
const (
	Search      Service = "search"
	VendorGraph Service = "vendorgraph"
	Auth        Service = "auth"
	// Endpoint is the remote adapter the Desktop bridge forwards to.
	Endpoint Service = "BMCIS MCP endpoint"
)

// FromBackend maps a backend call's failure to an answer. Vendor-specific
// NOT_FOUND and FAILED_PRECONDITION carry details and are handled by the
// vendor tool before it falls back to this mapping.
func FromBackend(svc Service, err error) *Error {
	if e, ok := As(err); ok {
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return NewServiceUnavailable(string(svc), "no answer before the deadline", true)
	case errors.Is(err, context.Canceled):
		return NewServiceUnavailable(string(svc), "the call was canceled", true)
	}
	st, ok := status.FromError(err)
	if !ok {
		return NewServiceUnavailable(string(svc), "unexpected failure", true)
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if databaseCause(st) {
			return dbConnection(svc)
		}
		return NewServiceUnavailable(string(svc), "it cannot be reached", true)
	case codes.DeadlineExceeded:
		return NewServiceUnavailable(string(svc), "no answer before the deadline", true)
	case codes.Canceled:
		return NewServiceUnavailable(string(svc), "the call was canceled", true)
	case codes.ResourceExhausted:
		return NewServiceUnavailable(string(svc), "it is overloaded", true)
	case codes.Unimplemented:
		return NewServiceUnavailable(string(svc), "the operation is not implemented by this deployment", false)
	case codes.Unauthenticated, codes.PermissionDenied:
		return NewServiceUnavailable(string(svc), "the adapter is not authorized to call it (check BMCIS_SERVICE_TOKEN)", false)
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound, codes.FailedPrecondition:
		e := newErr(InvalidParams, false, invalidPrefix(svc)+msg,
			"Check the parameter types and ranges in the tool's input schema.")
		e.Details = map[string]any{"service": string(svc), "grpc_code": st.Code().String()}
		return e
	}
	// Internal, Unknown, DataLoss, Aborted, AlreadyExists.
	if svc == Search {
		e := newErr(SearchFailed, true, "Search failed: "+internalMessage(msg),
			"Retry once; if it fails again, report the request_id to the administrator.")
		e.Details = map[string]any{"grpc_code": st.Code().String()}
		return e
	}
	e := NewServiceUnavailable(string(svc), "Vendor info retrieval failed: "+internalMessage(msg), true)
	e.Details["grpc_code"] = st.Code().String()
	return e
}

func invalidPrefix(svc Service) string {
	if svc == VendorGraph {
		return "Request validation failed: "
	}
	return "Invalid request parameters: "
}

func internalMessage(msg string) string {
	if msg == "" {
		return "internal error"
	}
	return msg
}

func dbConnection(svc Service) *Error {
	msg := "Search failed: Database connection error"
	if svc == VendorGraph {
		msg = "Vendor info retrieval failed: Database connection error"
	}
	e := newErr(DBConnection, true, msg, "Retry after 5 seconds, with exponential backoff.")
	e.Details = map[string]any{"service": string(svc)}
	return e
}

// databaseCause reports whether an UNAVAILABLE came from the service's
// database: the typed reason the services attach (platform/pg), or, from an
// older service, the word in the message.
func databaseCause(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "DATABASE_UNAVAILABLE" {
			return true
		}
	}
	return strings.Contains(strings.ToLower(st.Message()), "database")
}
