package server

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

const (
	maxTextLen  = 100
	minLifetime = time.Minute
	maxLifetime = 10 * 365 * 24 * time.Hour
	maxOverlap  = 90 * 24 * time.Hour
)

// validateText checks a name or owner. Messages name the field but never
// quote the value.
func validateText(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return grpcserver.InvalidArgument(field, "must not be empty")
	case !utf8.ValidString(v):
		return grpcserver.InvalidArgument(field, "must be valid UTF-8")
	case utf8.RuneCountInString(v) > maxTextLen:
		return grpcserver.InvalidArgument(field, "must be at most %d characters", maxTextLen)
	case strings.ContainsFunc(v, unicode.IsControl):
		return grpcserver.InvalidArgument(field, "must not contain control characters")
	}
	return nil
}

// validateKeyID checks a key id. A full key pasted by mistake is refused
// without being echoed.
func validateKeyID(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", grpcserver.InvalidArgument("key_id", "must not be empty")
	case strings.HasPrefix(v, keys.Prefix):
		return "", grpcserver.InvalidArgument("key_id", "takes the key id (the part between %q and the next '_'), not the full key", keys.Prefix)
	case !keys.ValidID(v):
		return "", grpcserver.InvalidArgument("key_id", "must be 16 characters from a-z and 2-7")
	}
	return v, nil
}

func validDuration(field string, d *durationpb.Duration, lo, hi time.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, grpcserver.InvalidArgument(field, "is not a valid duration")
	}
	v := d.AsDuration()
	if v < lo || v > hi {
		return 0, grpcserver.InvalidArgument(field, "must be between %s and %s", lo, hi)
	}
	return v, nil
}

func validateCreate(req *authv1.CreateKeyRequest) (keys.NewKey, error) {
	nk := keys.NewKey{Name: strings.TrimSpace(req.GetName()), Owner: strings.TrimSpace(req.GetOwner())}
	if err := validateText("name", nk.Name, true); err != nil {
		return nk, err
	}
	if err := validateText("owner", nk.Owner, false); err != nil {
		return nk, err
	}
	if nk.Owner == "" {
		nk.Owner = nk.Name
	}
	nk.Limits = keys.Limits{}
	for _, tl := range req.GetLimits().GetTiers() {
		name := strings.TrimSpace(tl.GetTier())
		if ratelimit.Index(name) < 0 {
			names := make([]string, len(ratelimit.Tiers))
			for i, t := range ratelimit.Tiers {
				names[i] = t.Name
			}
			return nk, grpcserver.InvalidArgument("limits.tiers", "tier must be one of %s", strings.Join(names, ", "))
		}
		if _, dup := nk.Limits[name]; dup {
			return nk, grpcserver.InvalidArgument("limits.tiers", "tier %s is given twice", name)
		}
		if v := tl.GetValue(); v < 0 || v > limiter.MaxLimit {
			return nk, grpcserver.InvalidArgument("limits."+name, "must be between 0 (service default) and %d", limiter.MaxLimit)
		}
		nk.Limits[name] = tl.GetValue()
	}
	if req.ExpiresIn != nil {
		d, err := validDuration("expires_in", req.GetExpiresIn(), minLifetime, maxLifetime)
		if err != nil {
			return nk, err
		}
		nk.ExpiresIn = d
	}
	var err error
	if nk.Scopes.Categories, err = validateList("scopes.categories", req.GetScopes().GetCategories(), nil); err != nil {
		return nk, err
	}
	if nk.Scopes.Tools, err = validateList("scopes.tools", req.GetScopes().GetTools(), Tools); err != nil {
		return nk, err
	}
	if nk.Groups, err = access.ParseGroups(req.GetGroups()); err != nil {
		return nk, grpcserver.InvalidArgument("groups", "%v", err)
	}
	return nk, nil
}

// maxScopeEntries bounds a scope list; a key's record is read on every check.
const maxScopeEntries = 50

// validateList trims, checks and de-duplicates a scope list, keeping its
// order; allowed, when set, is the closed set of names it may hold.
func validateList(field string, in, allowed []string) ([]string, error) {
	if len(in) > maxScopeEntries {
		return nil, grpcserver.InvalidArgument(field, "must have at most %d entries", maxScopeEntries)
	}
	var out []string
	for _, v := range in {
		v = strings.TrimSpace(v)
		if err := validateText(field, v, true); err != nil {
			return nil, err
		}
		if allowed != nil && !slices.Contains(allowed, v) {
			return nil, grpcserver.InvalidArgument(field, "entries must be among %s", strings.Join(allowed, ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
