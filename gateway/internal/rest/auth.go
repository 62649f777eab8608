package rest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/clientaddr"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/platform/readscope"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

// Credential headers. They are read by the gateway and never forwarded as
// such: an operator's credential (X-Admin-Token: the admin credential on key
// routes, the ingest credential on document deletion) replaces the gateway's
// own read credential for that one upstream call, and the service it reaches
// decides by its role (platform/rpcauth); the API key goes only into
// auth.Check.
const (
	HeaderAPIKey     = "X-API-Key"
	HeaderAdminToken = "X-Admin-Token"
	HeaderRequestID  = "X-Request-Id"
)

// AuthDomain marks denials decided by the auth service (ErrorInfo.domain).
const AuthDomain = "auth.bmcis"

// authCheckTimeout bounds one auth.Check or admin probe.
const authCheckTimeout = 5 * time.Second

type adminTokenKey struct{}

// apiKeyFrom returns the caller's key from X-API-Key or Authorization: Bearer.
func apiKeyFrom(h http.Header) string {
	if k := strings.TrimSpace(h.Get(HeaderAPIKey)); k != "" {
		return k
	}
	if a := strings.TrimSpace(h.Get("Authorization")); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// stripCredentials returns r with the credential headers removed, so that
// nothing downstream (grpc-gateway forwards Authorization by default) can
// pass them on or log them.
func stripCredentials(r *http.Request) *http.Request {
	h := r.Header
	if h.Get(HeaderAPIKey) == "" && h.Get("Authorization") == "" && h.Get(HeaderAdminToken) == "" {
		return r
	}
	r2 := r.WithContext(r.Context())
	r2.Header = h.Clone()
	r2.Header.Del(HeaderAPIKey)
	r2.Header.Del("Authorization")
	r2.Header.Del(HeaderAdminToken)
	return r2
}

// authorize checks a request against what its route requires. It returns the
// request to continue with (credentials stripped; for admin routes the token
// attached for the upstream call) or the status to answer with.
// tool is what the route stands for in a key's tool scope (Route.ScopeTool).
func (e *Edge) authorize(w http.ResponseWriter, r *http.Request, access Access, operation, tool, service string) (*http.Request, error) {
	ctx := r.Context()
	switch access {
	case Public:
		return stripCredentials(r), nil
	case Admin:
		tok := strings.TrimSpace(r.Header.Get(HeaderAdminToken))
		if tok == "" {
			e.metrics.Denials.WithLabelValues("ADMIN_TOKEN_REQUIRED").Inc()
			return nil, apierror.New(codes.Unauthenticated, "ADMIN_TOKEN_REQUIRED",
				"this route needs "+operatorCredential(r)+" in "+HeaderAdminToken, nil).Err()
		}
		// The gateway holds no admin or ingest credential: the operator's
		// goes upstream in place of its own, and the service's role table
		// accepts or refuses it.
		r = stripCredentials(r)
		ctx = context.WithValue(grpcclient.WithCredential(r.Context(), tok), adminTokenKey{}, true)
		return r.WithContext(ctx), nil
	default:
		resp, err := e.check(ctx, apiKeyFrom(r.Header), remoteHost(r), operation, tool)
		if err != nil {
			return nil, err
		}
		if rec := recorderFrom(ctx); rec != nil && resp.GetPrincipal() != nil {
			rec.keyID = resp.GetPrincipal().GetKeyId()
		}
		setRateLimitHeaders(w, resp)
		if !resp.GetAllowed() {
			e.metrics.Denials.WithLabelValues(denialName(resp.GetDenialReason())).Inc()
			return nil, denialStatus(resp).Err()
		}
		// The services cache replies per caller, so cache_hit tells a caller
		// only about its own earlier calls (platform/cacheowner).
		ctx = readscope.WithAccess(readscope.With(ctx, resp.GetScopes().GetCategories()), resp.GetPrincipal().GetAccess())
		ctx = cacheowner.With(ctx, apiKeyFrom(r.Header))
		return stripCredentials(r).WithContext(ctx), nil
	}
}

// remoteHost is the client's address, without the port
// (platform/clientaddr): the connection's, or what a trusted proxy
// (BMCIS_TRUSTED_PROXIES) forwarded; auth budgets failed checks by it.
func remoteHost(r *http.Request) string { return clientaddr.Of(r) }

// check calls auth.Check; a failure to get a verdict fails closed.
func (e *Edge) check(ctx context.Context, key, clientAddress, operation, tool string) (*authv1.CheckResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, authCheckTimeout)
	defer cancel()
	resp, err := e.authClient.Check(cctx, &authv1.CheckRequest{ApiKey: key, Operation: operation, Tool: tool,
		ClientAddress: clientAddress})
	if err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "auth check failed", "error", err.Error())
		return nil, authUnavailable(err)
	}
	return resp, nil
}

func authUnavailable(err error) error {
	if status.Code(err) == codes.Canceled {
		return status.Error(codes.Canceled, "request canceled")
	}
	return apierror.New(codes.Unavailable, "AUTH_UNAVAILABLE",
		"the auth service could not check the credentials; try again", nil, apierror.RetryInfo(1)).Err()
}

func denialName(r authv1.DenialReason) string {
	name := strings.TrimPrefix(r.String(), "DENIAL_REASON_")
	if r == authv1.DenialReason_DENIAL_REASON_UNSPECIFIED || strings.HasPrefix(name, "DENIAL_REASON") || name == "" {
		return "ACCESS_DENIED"
	}
	if _, err := strconv.Atoi(name); err == nil { // a reason newer than this binary
		return "ACCESS_DENIED"
	}
	return name
}

// denialStatus maps a refused Check to a status: no or unknown key → 401,
// a known key that may no longer be used → 403, exhausted limits → 429.
func denialStatus(resp *authv1.CheckResponse) *status.Status {
	reason := denialName(resp.GetDenialReason())
	var c codes.Code
	var def string
	switch resp.GetDenialReason() {
	case authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED:
		c, def = codes.Unauthenticated, "an API key is required: send it in "+HeaderAPIKey+" or Authorization: Bearer"
	case authv1.DenialReason_DENIAL_REASON_AUTH_INVALID:
		c, def = codes.Unauthenticated, "the API key is not valid"
	case authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED:
		c, def = codes.PermissionDenied, "the API key has expired"
	case authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED:
		c, def = codes.PermissionDenied, "the API key has been revoked"
	case authv1.DenialReason_DENIAL_REASON_RATE_LIMIT:
		c, def = codes.ResourceExhausted, "rate limit exceeded"
	case authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED:
		c, def = codes.ResourceExhausted, "too many failed API key checks from this address; retry later"
	case authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE:
		c, def = codes.Unavailable, "rate limits cannot be counted right now; retry shortly"
	default:
		c, def = codes.PermissionDenied, "access denied"
	}
	msg := resp.GetMessage()
	if msg == "" {
		msg = def
	}
	meta := map[string]string{}
	if resp.GetDenialReason() == authv1.DenialReason_DENIAL_REASON_RATE_LIMIT {
		for _, t := range resp.GetRemaining().GetTiers() {
			meta["remaining_"+t.GetTier()] = strconv.FormatInt(t.GetValue(), 10)
		}
		for _, t := range resp.GetLimits().GetTiers() {
			meta["limit_"+t.GetTier()] = strconv.FormatInt(t.GetValue(), 10)
		}
		meta["reset_in_seconds"] = strconv.FormatInt(int64(max(resp.GetResetInSeconds(), 1)), 10)
	}
	p := status.New(c, msg).Proto()
	if info, err := anypb.New(&errdetails.ErrorInfo{Reason: reason, Domain: AuthDomain, Metadata: meta}); err == nil {
		p.Details = append(p.Details, info)
	}
	switch resp.GetDenialReason() {
	case authv1.DenialReason_DENIAL_REASON_RATE_LIMIT, authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE,
		authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED:
		p.Details = append(p.Details, apierror.RetryInfo(int64(max(resp.GetResetInSeconds(), 1))))
	}
	return status.FromProto(p)
}

// setRateLimitHeaders writes one pair of headers per tier the auth service
// reports (X-RateLimit-Limit-Minute, X-RateLimit-Remaining-Minute, ...) and
// the unsuffixed X-RateLimit-* of the first (shortest) tier, which is what
// most clients read.
func setRateLimitHeaders(w http.ResponseWriter, resp *authv1.CheckResponse) {
	limits := resp.GetLimits().GetTiers()
	if len(limits) == 0 || limits[0].GetValue() <= 0 {
		return
	}
	remaining := map[string]int64{}
	for _, t := range resp.GetRemaining().GetTiers() {
		remaining[t.GetTier()] = max(t.GetValue(), 0)
	}
	h := w.Header()
	for _, t := range limits {
		sfx := "-" + ratelimit.HeaderSuffix(t.GetTier())
		h.Set("X-RateLimit-Limit"+sfx, strconv.FormatInt(t.GetValue(), 10))
		h.Set("X-RateLimit-Remaining"+sfx, strconv.FormatInt(remaining[t.GetTier()], 10))
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(limits[0].GetValue(), 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining[limits[0].GetTier()], 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(max(resp.GetResetInSeconds(), 0)), 10))
}

// operatorCredential names the credential an Admin route's X-Admin-Token
// must carry, from the one role table (platform/rpcauth): the header is the
// same for key administration (admin) and documents and sources (ingest).
func operatorCredential(r *http.Request) string {
	rt, ok := routeOf(r)
	if !ok {
		return "an operator credential"
	}
	roles, _ := rpcauth.Rule(rt.FullMethod())
	names := make([]string, 0, len(roles))
	for _, role := range roles {
		names = append(names, string(role))
	}
	if len(names) == 0 {
		return "an operator credential"
	}
	return "the " + strings.Join(names, " or ") + " credential"
}
