package transport

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/logging"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
)

// WithOAuth makes h an OAuth 2.1 resource server: it serves the protected
// resource metadata, and on /mcp it answers 401 with a challenge pointing
// at it when no credential is sent or an access token is refused, and 403
// insufficient_scope to a valid token granting no scope of this server. A
// verified token's identity goes into the request context (the auth
// service decides what it may do). API keys (X-API-Key, or a bearer that
// is not a JWT) pass through unchanged to the per-call key check.
//
// A request whose access token it answers itself (refused, or not checked
// because the keys could not be fetched) goes to audit as the tools' calls
// do (docs/AUDIT.md); nil records nothing.
func WithOAuth(v *oauth.Verifier, h http.Handler, logger *slog.Logger, audit *auditlog.Recorder) http.Handler {
	mux := http.NewServeMux()
	for _, p := range v.MetadataPaths() {
		mux.Handle(p, v.MetadataHandler())
	}
	mux.Handle("/mcp", requireCredential(v, h, logger, audit))
	mux.Handle("/", h)
	return mux
}

// auditRefusal records a request the OAuth check answered with outcome.
// The body is not read (the refusal comes first, and an unauthenticated
// caller's body is not worth parsing), so the entry names the route, not a
// tool; no principal was verified. Record never blocks the answer.
func auditRefusal(audit *auditlog.Recorder, r *http.Request, started time.Time, outcome apierr.Code, requestID string) {
	audit.Record(auditlog.Entry{
		Time: started, ClientAddress: clientAddress(r),
		Tool: r.Method + " " + r.URL.Path, Target: r.URL.Path,
		Outcome: string(outcome), RequestID: requestID,
	})
}

func requireCredential(v *oauth.Verifier, h http.Handler, logger *slog.Logger, audit *auditlog.Recorder) http.Handler {
	challenge := func(w http.ResponseWriter, err error) {
		w.Header().Set("WWW-Authenticate", v.Challenge(err))
		msg := "authorization required: send an OAuth access token (see " + v.MetadataURL() + ") or an API key"
		if err != nil {
			msg = "the access token was refused; obtain a new one"
		}
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"jsonrpc": "2.0", "id": nil,
			"error": map[string]any{"code": -32001, "message": msg},
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSpace(r.Header.Get("X-API-Key")) != "" {
			h.ServeHTTP(w, r)
			return
		}
		token := APIKey(r.Header)
		switch {
		case token == "":
			challenge(w, nil)
			return
		case !looksLikeJWT(token):
			h.ServeHTTP(w, r) // an API key in Authorization: Bearer
			return
		}
		started := time.Now()
		id, err := v.Verify(r.Context(), token)
		// A refusal's request id ties its audit entry to its log line.
		requestID := ""
		if err != nil {
			requestID = logging.NewRequestID()
		}
		switch {
		case errors.Is(err, oauth.ErrUnavailable):
			logger.WarnContext(r.Context(), "access token not checked", "error", err.Error(), "request_id", requestID)
			auditRefusal(audit, r, started, apierr.ServiceUnavailable, requestID)
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{
				"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32002, "message": "the authorization server's keys could not be fetched; retry shortly"},
			})
			return
		case errors.Is(err, oauth.ErrInsufficientScope):
			logger.InfoContext(r.Context(), "access token refused", "error", err.Error(), "scopes", strings.Join(id.Scopes, " "), "request_id", requestID)
			auditRefusal(audit, r, started, apierr.AuthInvalid, requestID)
			w.Header().Set("WWW-Authenticate", v.Challenge(err))
			writeJSON(w, http.StatusForbidden, map[string]any{
				"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32001, "message": "the access token grants no scope of this server; obtain one with " + strings.Join(v.Scopes(), " or ")},
			})
			return
		case err != nil:
			logger.InfoContext(r.Context(), "access token refused", "error", err.Error(), "request_id", requestID)
			auditRefusal(audit, r, started, apierr.AuthInvalid, requestID)
			challenge(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(oauth.WithIdentity(r.Context(), id)))
	})
}

// looksLikeJWT tells an access token (header.payload.signature) from an
// API key (bmcis_<id>_<secret>, no dots).
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }
