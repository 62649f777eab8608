package testfake

import (
	"context"
	"sync"
	"time"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

// API keys the fake auth service knows.
const (
	KeyGood     = "bmcis_good_secret"
	KeyExpired  = "bmcis_expired_secret"
	KeyRevoked  = "bmcis_revoked_secret"
	KeyLimited  = "bmcis_limited_secret"
	KeyDegraded = "bmcis_degraded_secret"
	// KeyVendorOnly may call find_vendor_info only; other tools are
	// refused as the real service does (TOOL_NOT_ALLOWED, naming it).
	KeyVendorOnly = "bmcis_vendoronly_secret"
	// KeyScopeUnsaid is refused every tool (TOOL_NOT_ALLOWED) with no
	// scope in the answer, as an auth that does not say it would.
	KeyScopeUnsaid = "bmcis_scopeunsaid_secret"
	// Any other non-empty key is invalid.
)

// Auth is the stand-in auth service.
type Auth struct {
	authv1.UnimplementedAuthServiceServer

	mu    sync.Mutex
	delay time.Duration
	ops   []string
	errs  []error
}

// SetDelay delays every Check.
func (a *Auth) SetDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delay = d
}

// FailNext makes the next checks fail with errs.
func (a *Auth) FailNext(errs ...error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, errs...)
}

// Operations lists the operations checked so far.
func (a *Auth) Operations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ops...)
}

// Check answers from the key table.
func (a *Auth) Check(ctx context.Context, req *authv1.CheckRequest) (*authv1.CheckResponse, error) {
	a.mu.Lock()
	a.ops = append(a.ops, req.GetOperation())
	d := a.delay
	var err error
	if len(a.errs) > 0 {
		err, a.errs = a.errs[0], a.errs[1:]
	}
	a.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	limits := RateLimits(100, 1000, 10000)
	ok := &authv1.CheckResponse{
		Allowed: true, Principal: &authv1.Principal{KeyId: "good", Name: "test", Owner: "tests"},
		Remaining: RateLimits(99, 999, 9999), Limits: limits, ResetInSeconds: 60,
	}
	deny := func(r authv1.DenialReason, msg string) *authv1.CheckResponse {
		return &authv1.CheckResponse{DenialReason: r, Message: msg, Limits: limits}
	}
	switch req.GetApiKey() {
	case KeyGood:
		return ok, nil
	case KeyDegraded:
		ok.LimiterDegraded = true
		return ok, nil
	case KeyVendorOnly:
		scopes := &authv1.Scopes{Tools: []string{"find_vendor_info"}}
		if req.GetTool() != "find_vendor_info" {
			r := deny(authv1.DenialReason_DENIAL_REASON_TOOL_NOT_ALLOWED, "the API key may not use this tool; it may use: find_vendor_info.")
			r.Principal, r.Scopes = ok.Principal, scopes
			return r, nil
		}
		ok.Scopes = scopes
		return ok, nil
	case KeyScopeUnsaid:
		r := deny(authv1.DenialReason_DENIAL_REASON_TOOL_NOT_ALLOWED, "the API key may not use this tool.")
		r.Principal = ok.Principal
		return r, nil
	case "":
		return deny(authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED, "an API key is required"), nil
	case KeyExpired:
		return deny(authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED, "the API key has expired"), nil
	case KeyRevoked:
		return deny(authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED, "the API key was revoked"), nil
	case KeyLimited:
		r := deny(authv1.DenialReason_DENIAL_REASON_RATE_LIMIT, "rate limit exceeded")
		r.Remaining = RateLimits(0, 450, 8500)
		r.ResetInSeconds = 35
		return r, nil
	}
	return deny(authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, "unknown API key"), nil
}

// RateLimits is a minute/hour/day reply as the auth service sends it.
func RateLimits(minute, hour, day int64) *authv1.RateLimits {
	return &authv1.RateLimits{Tiers: []*authv1.TierLimit{
		{Tier: "minute", Value: minute}, {Tier: "hour", Value: hour}, {Tier: "day", Value: day}}}
}
