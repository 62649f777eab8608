// Package server implements authv1.AuthService: Check (verify a key, then
// charge its rate limits) and the key admin RPCs.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/services/auth/internal/audit"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
	"github.com/bmcis/knowledge/services/auth/internal/oauthpolicy"
)

// Messages for the end user, one per denial reason. The first two and the
// last are the documented wording the adapter and gateway show as is.
const (
	MsgAuthRequired = "Authentication required. API key must be provided."
	MsgAuthInvalid  = "Invalid API key. Please check your credentials."
	MsgAuthExpired  = "API key has expired. Please ask your administrator for a new key."
	MsgAuthRevoked  = "API key has been revoked. Please ask your administrator for a new key."
	MsgRateLimit    = "Rate limit exceeded"
	// MsgLimiterUnavailable refuses a call that cannot be counted (closed
	// mode while the shared limiter is down).
	MsgLimiterUnavailable = "Rate limits cannot be counted right now; please retry shortly"
	// MsgAuthThrottled refuses an unverified key from a client address
	// that made too many failed checks lately.
	MsgAuthThrottled = "Too many failed API key checks from your address; please retry later."
)

// toolNotAllowed is the refusal of tool, outside the key's tool scope, with
// the tools the key may use. It names the tool as the MCP adapter's refusal
// does, so REST callers read the same; a name that is no tool (the caller's
// text) is not echoed.
func toolNotAllowed(tool string, allowed []string) string {
	var refused string
	switch {
	case tool == "":
		refused = "This API key may not be used without naming a tool"
	case slices.Contains(Tools, tool):
		refused = "This API key may not use " + tool
	default:
		refused = "This API key may not use this tool"
	}
	return refused + "; it may use: " + strings.Join(allowed, ", ") + "."
}

// Tools are the names a key's tool scope may list: the MCP tools, which the
// REST routes also name for the reads they stand for.
var Tools = []string{"semantic_search", "get_chunks", "find_vendor_info"}

// Server answers AuthService calls.
type Server struct {
	authv1.UnimplementedAuthServiceServer
	verifier *keys.Verifier
	manager  *keys.Manager
	usage    *keys.UsageRecorder
	limiter  limiter.Limiter
	defaults limiter.Limits
	lifetime time.Duration
	leaseMax time.Duration
	clock    func() time.Time
	checks   *prometheus.CounterVec
	oauth    oauthpolicy.Policy
	failed   *failedChecks
	audit    *audit.Store

	// leaseUnits counts units prepaid by Check (granted) and given back by
	// ReleaseLease (refunded): what the adapters' leases move.
	leaseUnits *prometheus.CounterVec
}

// Deps are what a Server is built from.
type Deps struct {
	Verifier *keys.Verifier
	Manager  *keys.Manager
	Usage    *keys.UsageRecorder
	Limiter  limiter.Limiter
	Defaults limiter.Limits
	// KeyLifetime is given to keys created without a lifetime; 0: none.
	KeyLifetime time.Duration
	// LeaseMax is the longest lease Check grants (BMCIS_AUTH_LEASE_MAX);
	// 0: none.
	LeaseMax   time.Duration
	Clock      func() time.Time
	Registerer prometheus.Registerer
	// OAuthIssuers are the access-token issuers whose subjects Check
	// accepts (from the adapter, which verified the token); none: no
	// OAuth caller is accepted.
	OAuthIssuers []string
	// OAuthGroupMap maps a token's groups claim values to access groups
	// (BMCIS_OAUTH_GROUP_MAP); empty: valid group names are taken as is.
	OAuthGroupMap map[string]string
	// FailedChecksPerClient is how many failed checks a client address
	// makes per FailedChecksWindow before a key id not held in memory is
	// refused without a lookup (DENIAL_REASON_AUTH_THROTTLED); 0: no budget.
	FailedChecksPerClient int
	FailedChecksWindow    time.Duration
	// Audit holds the audit trail; nil refuses its RPCs (Unimplemented).
	Audit *audit.Store
}

// New returns a server.
func New(d Deps) (*Server, error) {
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if err := d.Defaults.Validate(); err != nil {
		return nil, fmt.Errorf("default limits: %w", err)
	}
	s := &Server{
		verifier: d.Verifier, manager: d.Manager, usage: d.Usage, limiter: d.Limiter,
		defaults: d.Defaults, lifetime: d.KeyLifetime, leaseMax: d.LeaseMax, clock: d.Clock,
		oauth:  oauthpolicy.New(d.OAuthIssuers).WithGroupMap(d.OAuthGroupMap),
		failed: newFailedChecks(d.FailedChecksPerClient, d.FailedChecksWindow, d.Clock),
		audit:  d.Audit,
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_auth_checks_total",
			Help: "Check calls, by result (allowed or the denial reason).",
		}, []string{"result"}),
		leaseUnits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_auth_lease_units_total",
			Help: "Rate-limit units of key leases, by event: granted (prepaid by Check beyond its call) or refunded (unspent, given back by ReleaseLease).",
		}, []string{"event"}),
	}
	// Both series exist from the start, so a rate over them is defined.
	for _, event := range []string{leaseGranted, leaseRefunded} {
		s.leaseUnits.WithLabelValues(event)
	}
	if d.Registerer != nil {
		if err := d.Registerer.Register(s.checks); err != nil {
			return nil, err
		}
		if err := d.Registerer.Register(s.leaseUnits); err != nil {
			return nil, fmt.Errorf("register the lease metrics: %w", err)
		}
	}
	return s, nil
}

// Check verifies the key, then takes one unit from each rate-limit tier.
func (s *Server) Check(ctx context.Context, req *authv1.CheckRequest) (*authv1.CheckResponse, error) {
	presented := strings.TrimSpace(req.GetApiKey())
	if req.GetOauth() != nil && !rpcauth.MayClaim(ctx, rpcauth.OAuthSubject) {
		// Asserting a subject reads as that subject: only the adapter,
		// which verified the token, may (platform/rpcauth's claims). Any
		// other holder of a read credential is refused, even beside a key.
		return nil, status.Error(codes.PermissionDenied, "only the MCP adapter's credential may present an OAuth subject")
	}
	if presented == "" && req.GetOauth() != nil {
		// An access token's subject: the same tool-scope and rate-limit
		// checks as a key, with the scopes and identity the policy gives.
		k, refusal := s.oauth.Key(req.GetOauth())
		if k == nil {
			return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, refusal, nil, req), nil
		}
		return s.decide(ctx, req, keys.Verdict{Outcome: keys.Valid, Key: k})
	}
	if presented == "" {
		return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED, MsgAuthRequired, nil, req), nil
	}
	// Only an edge that sees the end user's connection may say where it
	// comes from; from any other caller the address is ignored.
	client, hasClient := netip.Prefix{}, false
	if req.GetClientAddress() != "" && rpcauth.MayClaim(ctx, rpcauth.ClientAddress) {
		client, hasClient = clientOf(req.GetClientAddress())
	}
	if hasClient && s.verifier.NeedsLookup(presented) {
		if over, left := s.failed.exhausted(client); over {
			resp := s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED, MsgAuthThrottled, nil, req)
			resp.ResetInSeconds = ceilSeconds(left)
			return resp, nil
		}
	}
	verdict, err := s.verifier.Verify(ctx, presented)
	if err != nil {
		return nil, fmt.Errorf("verify key: %w", err)
	}
	if hasClient && verdict.Outcome == keys.Invalid {
		s.failed.failed(client)
	}
	resp, err := s.decide(ctx, req, verdict)
	if resp != nil {
		resp.KeyRecordStale = verdict.Stale
	}
	return resp, err
}

// decide turns a verified key into Check's answer: its state, its tool
// scope, then its rate limits.
func (s *Server) decide(ctx context.Context, req *authv1.CheckRequest, verdict keys.Verdict) (*authv1.CheckResponse, error) {
	outcome, k := verdict.Outcome, verdict.Key
	switch outcome {
	case keys.Invalid:
		return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, MsgAuthInvalid, nil, req), nil
	case keys.ExpiredKey:
		return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED, MsgAuthExpired, k, req), nil
	case keys.RevokedKey:
		return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED, MsgAuthRevoked, k, req), nil
	}
	// Before the limiter: a call the key may not make costs it nothing.
	if tool := strings.TrimSpace(req.GetTool()); !k.Scopes.AllowsTool(tool) {
		msg := toolNotAllowed(tool, k.Scopes.Tools)
		return s.deny(ctx, authv1.DenialReason_DENIAL_REASON_TOOL_NOT_ALLOWED, msg, k, req), nil
	}

	limits := s.effectiveLimits(k.Limits)
	leaseFor, extra := s.leaseTerms(ctx, req, verdict)
	var (
		d   limiter.Decision
		err error
	)
	var lease limiter.Lease
	if ls, ok := s.limiter.(limiter.Leaser); ok && extra > 0 {
		if lease.ID, err = limiter.NewLeaseID(); err != nil {
			return nil, fmt.Errorf("lease for key %s: %w", k.ID, err)
		}
		lease.Units, lease.Keep = extra, leaseFor+limiter.ReleaseSlack
		d, err = ls.AllowExtra(ctx, k.ID, limits, lease)
	} else {
		d, err = s.limiter.Allow(ctx, k.ID, limits)
	}
	if errors.Is(err, limiter.ErrBusy) {
		logging.FromContext(ctx).WarnContext(ctx, "rate limiter busy", "error", err.Error())
		return nil, status.Error(codes.Unavailable, "rate limiter busy; retry shortly")
	}
	if err != nil {
		return nil, fmt.Errorf("rate limit key %s: %w", k.ID, err)
	}
	resp := &authv1.CheckResponse{
		Allowed:         d.Allowed,
		Principal:       principal(k),
		Scopes:          scopes(k.Scopes),
		Limits:          rateLimits(limits),
		ResetInSeconds:  ceilSeconds(d.Reset),
		LimiterDegraded: d.Degraded,
	}
	if !d.Degraded { // counts are unknown while the shared limiter is down
		resp.Remaining = rateLimits(d.Remaining)
	}
	if d.Allowed {
		if !oauthpolicy.IsOAuth(k.ID) { // no stored key to stamp
			s.usage.Record(k.ID, s.clock())
		}
		if d.Extra > 0 && !d.Degraded {
			resp.Lease = &authv1.Lease{Units: int32(d.Extra), ValidMs: int32(leaseFor.Milliseconds()), Id: lease.ID}
			s.leaseUnits.WithLabelValues(leaseGranted).Add(float64(d.Extra))
		}
		s.checks.WithLabelValues("allowed").Inc()
		return resp, nil
	}
	resp.DenialReason = authv1.DenialReason_DENIAL_REASON_RATE_LIMIT
	resp.Message = MsgRateLimit
	if d.Degraded {
		// Refused because nothing can count the call, not because the key
		// spent its quota: a different, retryable answer.
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE
		resp.Message = MsgLimiterUnavailable
	}
	s.checks.WithLabelValues(reasonLabel(resp.DenialReason)).Inc()
	tiers := make([]string, len(d.Exhausted))
	for i, t := range d.Exhausted {
		tiers[i] = ratelimit.Tiers[t].Name
	}
	logging.FromContext(ctx).DebugContext(ctx, "check refused", "key_id", k.ID,
		"reason", reasonLabel(resp.DenialReason), "tiers", tiers, "degraded", d.Degraded,
		"operation", clip(req.GetOperation()))
	return resp, nil
}

// leaseTerms says for how long, and how many units beyond this call, Check
// may prepay for the key (0: no lease): only for an API key (an OAuth
// subject's token may end any time), from a fresh key record, asked by the
// edge that can give unspent units back, and never past the key's expiry.
// The limiter decides how many it can actually give.
func (s *Server) leaseTerms(ctx context.Context, req *authv1.CheckRequest, verdict keys.Verdict) (time.Duration, int64) {
	want := int64(min(req.GetLeaseUnits(), ratelimit.MaxLeaseUnits))
	k := verdict.Key
	if want <= 0 || s.leaseMax <= 0 || verdict.Stale || oauthpolicy.IsOAuth(k.ID) ||
		req.GetApiKey() == "" || !rpcauth.MayClaim(ctx, rpcauth.LeaseUnits) {
		return 0, 0
	}
	valid := s.leaseMax
	if k.ExpiresAt != nil {
		valid = min(valid, k.ExpiresAt.Sub(s.clock()))
	}
	if valid < time.Millisecond {
		return 0, 0
	}
	return valid.Truncate(time.Millisecond), want
}

// The events of bmcis_auth_lease_units_total.
const (
	leaseGranted  = "granted"
	leaseRefunded = "refunded"
)

// ReleaseLease refunds the unspent units of a lease Check granted and
// records the key's last use. Only a lease auth holds a record of, for this
// key, refunds, at most the units granted, and once: a lease already
// released, expired, unknown or granted to another key answers OK with
// refunded_units 0 (the caller can do nothing better with an error, and
// nothing is refunded). A key that no longer exists refunds nothing.
func (s *Server) ReleaseLease(ctx context.Context, req *authv1.ReleaseLeaseRequest) (*authv1.ReleaseLeaseResponse, error) {
	id := strings.TrimSpace(req.GetKeyId())
	units := req.GetUnusedUnits()
	if !keys.ValidID(id) {
		return nil, status.Error(codes.InvalidArgument, "key_id is not a key id")
	}
	if units < 0 || units > ratelimit.MaxLeaseUnits {
		return nil, status.Errorf(codes.InvalidArgument, "unused_units must be between 0 and %d, got %d", ratelimit.MaxLeaseUnits, units)
	}
	if units > 0 && !limiter.ValidLeaseID(req.GetLeaseId()) {
		return nil, status.Error(codes.InvalidArgument, "lease_id is not a lease id (CheckResponse.lease.id)")
	}
	if req.GetLastUsed() != nil {
		if t := req.GetLastUsed().AsTime(); !t.After(s.clock()) {
			s.usage.Record(id, t)
		}
	}
	if units == 0 {
		return &authv1.ReleaseLeaseResponse{}, nil
	}
	ls, ok := s.limiter.(limiter.Leaser)
	if !ok {
		return &authv1.ReleaseLeaseResponse{}, nil
	}
	k, err := s.verifier.Lookup(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("release lease of key %s: %w", id, err)
	}
	if k == nil {
		return &authv1.ReleaseLeaseResponse{}, nil
	}
	refunded, err := ls.Refund(ctx, k.ID, s.effectiveLimits(k.Limits), req.GetLeaseId(), int64(units))
	if err != nil {
		return nil, fmt.Errorf("release lease of key %s: %w", id, err)
	}
	s.leaseUnits.WithLabelValues(leaseRefunded).Add(float64(refunded))
	logging.FromContext(ctx).DebugContext(ctx, "lease released", "key_id", id, "units", units,
		"refunded", refunded, "tool", clip(req.GetTool()))
	return &authv1.ReleaseLeaseResponse{RefundedUnits: int32(refunded)}, nil
}

func (s *Server) deny(ctx context.Context, reason authv1.DenialReason, msg string, k *keys.Key, req *authv1.CheckRequest) *authv1.CheckResponse {
	s.checks.WithLabelValues(reasonLabel(reason)).Inc()
	resp := &authv1.CheckResponse{DenialReason: reason, Message: msg}
	keyID := ""
	if k != nil { // the secret matched: say who it was, for the caller's logs
		resp.Principal = principal(k)
		resp.Scopes = scopes(k.Scopes) // a tool refusal names the tools the key may use
		keyID = k.ID
	}
	logging.FromContext(ctx).DebugContext(ctx, "check refused", "key_id", keyID,
		"reason", reasonLabel(reason), "operation", clip(req.GetOperation()))
	return resp
}

// effectiveLimits fills a key's unset tiers with the service defaults.
func (s *Server) effectiveLimits(own keys.Limits) limiter.Limits {
	out := make(limiter.Limits, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		out[i] = s.defaults[i]
		if v := own[t.Name]; v > 0 {
			out[i] = min(v, limiter.MaxLimit)
		}
	}
	return out
}

func reasonLabel(r authv1.DenialReason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "DENIAL_REASON_"))
}

// clip keeps a caller-supplied label short in logs.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// ceilSeconds rounds up, so "retry in N seconds" is never early.
func ceilSeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32((d + time.Second - 1) / time.Second)
}

func principal(k *keys.Key) *authv1.Principal {
	return &authv1.Principal{KeyId: k.ID, Name: k.Name, Owner: k.Owner, Access: access.CallerSet(k.User, k.Groups)}
}

// scopes is nil for an unscoped key, so callers test one field.
func scopes(sc keys.Scopes) *authv1.Scopes {
	if len(sc.Categories) == 0 && len(sc.Tools) == 0 {
		return nil
	}
	return &authv1.Scopes{Categories: sc.Categories, Tools: sc.Tools}
}

// rateLimits puts one value per tier on the wire, by name, in tier order.
func rateLimits(l limiter.Limits) *authv1.RateLimits {
	out := &authv1.RateLimits{Tiers: make([]*authv1.TierLimit, len(l))}
	for i, v := range l {
		out.Tiers[i] = &authv1.TierLimit{Tier: ratelimit.Tiers[i].Name, Value: v}
	}
	return out
}

// ownLimits is a key's own limits on the wire: every tier, 0 for "default".
func ownLimits(own keys.Limits) *authv1.RateLimits {
	out := &authv1.RateLimits{Tiers: make([]*authv1.TierLimit, len(ratelimit.Tiers))}
	for i, t := range ratelimit.Tiers {
		out.Tiers[i] = &authv1.TierLimit{Tier: t.Name, Value: own[t.Name]}
	}
	return out
}

// CreateKey issues a key; the reply is the only place its full text appears.
func (s *Server) CreateKey(ctx context.Context, req *authv1.CreateKeyRequest) (*authv1.CreateKeyResponse, error) {
	nk, err := validateCreate(req)
	if err != nil {
		return nil, err
	}
	if req.ExpiresIn == nil {
		nk.ExpiresIn = s.lifetime
	}
	issued, err := s.manager.Create(ctx, nk)
	if err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	logging.FromContext(ctx).InfoContext(ctx, "key created", "key_id", issued.Key.ID,
		"name", issued.Key.Name, "owner", issued.Key.Owner,
		"scope_categories", issued.Key.Scopes.Categories, "scope_tools", issued.Key.Scopes.Tools, "groups", issued.Key.Groups)
	return &authv1.CreateKeyResponse{Key: apiKey(issued.Key), ApiKey: issued.Full}, nil
}

// ListKeys lists keys, never their secrets (only hashes are stored anyway).
func (s *Server) ListKeys(ctx context.Context, req *authv1.ListKeysRequest) (*authv1.ListKeysResponse, error) {
	owner := strings.TrimSpace(req.GetOwner())
	if err := validateText("owner", owner, false); err != nil {
		return nil, err
	}
	list, err := s.manager.List(ctx, owner, req.GetIncludeInactive())
	if err != nil {
		return nil, err
	}
	resp := &authv1.ListKeysResponse{Keys: make([]*authv1.ApiKey, 0, len(list))}
	for _, k := range list {
		// Show this replica's not-yet-flushed use too.
		if t, ok := s.usage.Pending(k.ID); ok && (k.LastUsedAt == nil || t.After(*k.LastUsedAt)) {
			k.LastUsedAt = &t
		}
		resp.Keys = append(resp.Keys, apiKey(k))
	}
	return resp, nil
}

// RevokeKey revokes a key: at once on this replica, within the key cache TTL
// (at most 30 s) on every other.
func (s *Server) RevokeKey(ctx context.Context, req *authv1.RevokeKeyRequest) (*authv1.RevokeKeyResponse, error) {
	id, err := validateKeyID(req.GetKeyId())
	if err != nil {
		return nil, err
	}
	k, err := s.manager.Revoke(ctx, id)
	if errors.Is(err, keys.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "no key with key_id %s", id)
	}
	if err != nil {
		return nil, err
	}
	logging.FromContext(ctx).InfoContext(ctx, "key revoked", "key_id", id)
	return &authv1.RevokeKeyResponse{Key: apiKey(k)}, nil
}

// defaultOverlap is how long a rotated key keeps working when the caller does
// not say.
const defaultOverlap = 24 * time.Hour

// RotateKey issues a successor key; the old one expires after the overlap.
func (s *Server) RotateKey(ctx context.Context, req *authv1.RotateKeyRequest) (*authv1.RotateKeyResponse, error) {
	id, err := validateKeyID(req.GetKeyId())
	if err != nil {
		return nil, err
	}
	rot := keys.Rotation{Overlap: defaultOverlap, DefaultLifetime: s.lifetime}
	if req.Overlap != nil {
		if rot.Overlap, err = validDuration("overlap", req.GetOverlap(), 0, maxOverlap); err != nil {
			return nil, err
		}
	}
	if req.ExpiresIn != nil {
		d, err := validDuration("expires_in", req.GetExpiresIn(), minLifetime, maxLifetime)
		if err != nil {
			return nil, err
		}
		rot.ExpiresIn = &d
	}
	issued, prev, err := s.manager.Rotate(ctx, id, rot)
	switch {
	case errors.Is(err, keys.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "no key with key_id %s", id)
	case errors.Is(err, keys.ErrInactive):
		return nil, status.Errorf(codes.FailedPrecondition, "key %s is revoked or expired; create a new key instead", id)
	case err != nil:
		return nil, err
	}
	logging.FromContext(ctx).InfoContext(ctx, "key rotated", "key_id", id, "successor", issued.Key.ID,
		"overlap", rot.Overlap.String())
	return &authv1.RotateKeyResponse{Key: apiKey(issued.Key), ApiKey: issued.Full, Previous: apiKey(prev)}, nil
}

func apiKey(k *keys.Key) *authv1.ApiKey {
	out := &authv1.ApiKey{
		KeyId:       k.ID,
		Name:        k.Name,
		Owner:       k.Owner,
		Limits:      ownLimits(k.Limits),
		CreatedAt:   timestamppb.New(k.CreatedAt),
		RotatedFrom: k.RotatedFrom,
		Scopes:      scopes(k.Scopes),
		Groups:      k.Groups,
	}
	if k.LastUsedAt != nil {
		out.LastUsedAt = timestamppb.New(*k.LastUsedAt)
	}
	if k.ExpiresAt != nil {
		out.ExpiresAt = timestamppb.New(*k.ExpiresAt)
	}
	if k.RevokedAt != nil {
		out.RevokedAt = timestamppb.New(*k.RevokedAt)
	}
	return out
}
