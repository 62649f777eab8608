// Package oauth makes the streamable HTTP endpoint an OAuth 2.1 resource
// server (MCP authorization; RFC 9728 protected resource metadata, RFC 8707
// resource indicators, RFC 9068 JWT access tokens).
//
// The adapter verifies a token's signature with the issuer's published
// keys (JWKS, discovered from the issuer's metadata, cached, refetched
// when a token names an unknown key id, so a rotation needs nothing, but
// at most once per KeyRefreshInterval whatever tokens arrive), its
// issuer, its audience (this resource's URL) and its expiry. It then hands
// the verified identity to the auth service, which alone decides what the
// subject may read and how fast (services/auth/internal/oauthpolicy).
package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/bmcis/knowledge/platform/oauthscope"
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the authorization server's issuer URL, exactly as in the
	// tokens' iss.
	Issuer string
	// Resource is this server's canonical URL (the /mcp endpoint): the
	// audience tokens must carry and the resource of the metadata.
	Resource string
	// JWKSURL is the issuer's key set; empty: discovered from the issuer's
	// metadata on first use.
	JWKSURL string
	// Scopes are advertised in the metadata and the challenge; empty:
	// kb:read.
	Scopes []string
	// HTTPClient fetches metadata and keys; nil: a client with a 5 s timeout.
	HTTPClient *http.Client
	// KeyRefreshInterval is the least time between two fetches of the key
	// set; 0: DefaultKeyRefreshInterval. go-oidc refetches the keys for
	// every token naming a key id it has not seen (concurrent ones share
	// one fetch), so without it anyone could make every request cost the
	// issuer a fetch with made-up key ids.
	KeyRefreshInterval time.Duration
	// AcceptUntypedTokens also accepts tokens whose JOSE header says typ
	// "JWT" or nothing, for identity providers that do not issue RFC 9068
	// access tokens (typ "at+jwt"). Off, such a token is refused: an ID
	// token or any other JWT of the issuer is not an access token.
	AcceptUntypedTokens bool
	// GroupsClaim names the claim holding the caller's groups (an array of
	// strings, or one string); empty: "groups". The auth service maps its
	// values to access groups (docs/ACCESS.md).
	GroupsClaim string
}

// DefaultGroupsClaim is the claim groups are read from unless configured.
const DefaultGroupsClaim = "groups"

// maxGroupClaims bounds the groups passed on from one token.
const maxGroupClaims = 256

// DefaultKeyRefreshInterval: at most one key set fetch per 5 s.
const DefaultKeyRefreshInterval = 5 * time.Second

// ErrUnavailable means the issuer's metadata or keys could not be fetched:
// the token may be fine; retry shortly.
var ErrUnavailable = errors.New("the authorization server's keys could not be fetched")

// ErrExpired and ErrInvalid are the refusals a client may see (RFC 6750
// invalid_token); the detail is only logged.
var (
	ErrExpired = errors.New("the access token has expired")
	ErrInvalid = errors.New("the access token is not valid for this resource")
)

// ErrInsufficientScope: a valid token that grants no scope of this server
// (RFC 6750 insufficient_scope, HTTP 403): the client should ask for one.
var ErrInsufficientScope = errors.New("the access token grants no scope of this server")

// Algorithms accepted on access tokens (asymmetric only: a shared secret
// would let the resource server mint tokens).
var Algorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// Identity is what a verified token says about its caller.
type Identity struct {
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
	// Groups are the token's groups claim values, as the token spells them.
	Groups []string
}

// CacheKey identifies the identity and its grant, for caches keyed by
// credential (never the token itself).
func (id Identity) CacheKey() string {
	s := slices.Clone(id.Scopes)
	slices.Sort(s)
	g := slices.Clone(id.Groups)
	slices.Sort(g)
	return "oauth\x00" + id.Issuer + "\x00" + id.Subject + "\x00" + strings.Join(s, " ") + "\x00" + strings.Join(g, "\x01")
}

type identityKey struct{}

// WithIdentity returns ctx carrying a verified identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the verified identity in ctx, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Verifier checks access tokens for one issuer and one resource.
type Verifier struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // nil until the key set URL is known
	// failedAt and failure remember a failed discovery for
	// discoveryBackoff, so that while the issuer is down requests answer
	// at once instead of queueing behind one slow attempt after another.
	failedAt time.Time
	failure  error
}

// discoveryBackoff is how long a failed discovery is not retried.
const discoveryBackoff = 2 * time.Second

// New returns a Verifier; it fetches nothing until the first token.
func New(cfg Config) *Verifier {
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oauthscope.Read}
	}
	if cfg.KeyRefreshInterval <= 0 {
		cfg.KeyRefreshInterval = DefaultKeyRefreshInterval
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	// Transport failures and server errors become ErrUnavailable, which
	// go-oidc passes through wrapped.
	wrapped := *client
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	wrapped.Transport = unavailableTransport{base}
	return &Verifier{cfg: cfg, client: &wrapped}
}

// Verify checks raw and returns its identity, or ErrExpired, ErrInvalid,
// ErrInsufficientScope or ErrUnavailable (wrapped with the detail, for
// logs). With ErrInsufficientScope the identity is returned too.
func (v *Verifier) Verify(ctx context.Context, raw string) (Identity, error) {
	if err := checkType(raw, v.cfg.AcceptUntypedTokens); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	verifier, err := v.oidcVerifier(ctx)
	if err != nil {
		return Identity{}, err
	}
	var fetch keyFetch
	tok, err := verifier.Verify(context.WithValue(oidc.ClientContext(ctx, v.client), keyFetchKey{}, &fetch), raw)
	if err != nil {
		if _, ok := errors.AsType[*oidc.TokenExpiredError](err); ok {
			return Identity{}, fmt.Errorf("%w: %v", ErrExpired, err)
		}
		if fetch.failure != nil || errors.Is(err, ErrUnavailable) {
			return Identity{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var claims struct {
		Scope    string   `json:"scope"`
		Scp      []string `json:"scp"`
		ClientID string   `json:"client_id"`
		AZP      string   `json:"azp"`
	}
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %v", ErrInvalid, err)
	}
	if tok.Subject == "" {
		return Identity{}, fmt.Errorf("%w: no subject", ErrInvalid)
	}
	id := Identity{Issuer: tok.Issuer, Subject: tok.Subject, ClientID: claims.ClientID, Scopes: oauthscope.Split(claims.Scope)}
	if id.ClientID == "" {
		id.ClientID = claims.AZP
	}
	if len(id.Scopes) == 0 {
		id.Scopes = claims.Scp // Entra ID and Okta send an array
	}
	if id.Groups, err = groupsClaim(tok, v.cfg.GroupsClaim); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !oauthscope.Parse(id.Scopes).Any {
		// Refused here, with the status the client can act on (ask for
		// another scope); auth's Check would refuse it too.
		return id, ErrInsufficientScope
	}
	return id, nil
}

// groupsClaim reads the groups claim named name (DefaultGroupsClaim when
// empty): an array of strings or one string; absent is none.
func groupsClaim(tok *oidc.IDToken, name string) ([]string, error) {
	if name == "" {
		name = DefaultGroupsClaim
	}
	var all map[string]json.RawMessage
	if err := tok.Claims(&all); err != nil {
		return nil, fmt.Errorf("claims: %v", err)
	}
	raw, ok := all[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil, fmt.Errorf("claim %q is neither a string nor an array of strings", name)
		}
		list = []string{one}
	}
	if len(list) > maxGroupClaims {
		return nil, fmt.Errorf("claim %q holds %d groups, at most %d", name, len(list), maxGroupClaims)
	}
	return list, nil
}

// AccessTokenType is the JOSE typ of an RFC 9068 access token.
const AccessTokenType = "at+jwt"

// checkType refuses a token whose JOSE header typ is not at+jwt (RFC 9068
// section 4; "application/" may prefix it, compared without case, RFC 7515
// section 4.1.9); with untyped, typ "JWT" or none passes too. It reads the
// header only: the signature, which covers it, is checked next.
func checkType(raw string, untyped bool) error {
	head, _, ok := strings.Cut(raw, ".")
	if !ok {
		return errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return fmt.Errorf("header: %v", err)
	}
	var h struct {
		Typ *string `json:"typ"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("header: %v", err)
	}
	typ := ""
	if h.Typ != nil {
		typ = strings.TrimPrefix(strings.ToLower(*h.Typ), "application/")
	}
	switch {
	case typ == AccessTokenType:
		return nil
	case untyped && (h.Typ == nil || typ == "jwt"):
		return nil
	case h.Typ == nil:
		return errors.New("the token has no typ; an access token says at+jwt (RFC 9068)")
	}
	return fmt.Errorf("typ %q is not at+jwt (RFC 9068)", *h.Typ)
}

// oidcVerifier returns the go-oidc verifier, discovering the key set URL
// on first use (and again after a failed attempt).
func (v *Verifier) oidcVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	if v.failure != nil && time.Since(v.failedAt) < discoveryBackoff {
		return nil, v.failure
	}
	jwks := v.cfg.JWKSURL
	if jwks == "" {
		var err error
		if jwks, err = v.discover(ctx); err != nil {
			v.failedAt, v.failure = time.Now(), err
			return nil, err
		}
	}
	// The key set's own client waits KeyRefreshInterval between fetches.
	keysClient := *v.client
	published := &keyIDs{}
	keysClient.Transport = &fetchInterval{base: v.client.Transport, every: v.cfg.KeyRefreshInterval, published: published}
	keys := keySet{KeySet: oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), &keysClient), jwks), published: published}
	v.verifier = oidc.NewVerifier(v.cfg.Issuer, keys, &oidc.Config{
		ClientID:             v.cfg.Resource, // the audience: RFC 8707
		SupportedSigningAlgs: Algorithms,
	})
	return v.verifier, nil
}

// discover reads jwks_uri from the issuer's OpenID Provider metadata, or
// its RFC 8414 authorization server metadata.
func (v *Verifier) discover(ctx context.Context) (string, error) {
	u, err := url.Parse(v.cfg.Issuer)
	if err != nil {
		return "", fmt.Errorf("%w: issuer: %v", ErrUnavailable, err)
	}
	candidates := []string{
		strings.TrimSuffix(v.cfg.Issuer, "/") + "/.well-known/openid-configuration",
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/"),
	}
	var last error
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if last = v.getJSON(ctx, c, &meta); last != nil {
			continue
		}
		if meta.Issuer != v.cfg.Issuer || meta.JWKSURI == "" {
			last = fmt.Errorf("%s names issuer %q and jwks_uri %q", c, meta.Issuer, meta.JWKSURI)
			continue
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("%w: discovery: %v", ErrUnavailable, last)
}

func (v *Verifier) getJSON(ctx context.Context, u string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

type unavailableTransport struct{ base http.RoundTripper }

func (t unavailableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if resp.StatusCode >= 500 {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s answered %s", ErrUnavailable, r.URL.Redacted(), resp.Status)
	}
	return resp, nil
}

// fetchInterval lets one request through per interval, shared by every
// token being verified; a fetch asked for sooner fails as ErrUnavailable,
// so the token is answered "retry shortly", not refused: it may be signed
// by a key published since the last fetch. go-oidc keeps its cached keys
// when a fetch fails, so known keys keep working meanwhile.
type fetchInterval struct {
	base  http.RoundTripper
	every time.Duration
	// published records the key ids of each key set fetched.
	published *keyIDs

	mu   sync.Mutex
	last time.Time
}

func (f *fetchInterval) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Response != nil {
		// A redirect hop of a fetch already let through (http.Client sets
		// Response on the requests it follows redirects with).
		return f.record(f.base.RoundTrip(r))
	}
	f.mu.Lock()
	if since := time.Since(f.last); !f.last.IsZero() && since < f.every {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: the key set was fetched %s ago; the next fetch is allowed in %s",
			ErrUnavailable, since.Round(time.Millisecond), (f.every - since).Round(time.Millisecond))
	}
	f.last = time.Now()
	f.mu.Unlock()
	return f.record(f.base.RoundTrip(r))
}

// record notes the key ids of a key set fetched.
func (f *fetchInterval) record(resp *http.Response, err error) (*http.Response, error) {
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	// go-oidc reads the whole body too; it gets the same bytes.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the key set: %v", ErrUnavailable, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	f.published.record(body)
	return resp, nil
}

// keyIDs are the key ids of the last key set fetched, which go-oidc holds
// as its cache: a token naming one of them whose signature fails was not
// signed by a key published since (a refetch cannot help), so it is
// refused, not answered "retry shortly" when the next fetch must wait.
type keyIDs struct {
	mu  sync.Mutex
	ids map[string]bool
}

// record reads the kids of a JWKS document; one that does not parse
// changes nothing (go-oidc keeps its cache then too). A nil *keyIDs
// records nothing.
func (k *keyIDs) record(jwks []byte) {
	if k == nil {
		return
	}
	var set struct {
		Keys []struct {
			KeyID string `json:"kid"`
		} `json:"keys"`
	}
	if json.Unmarshal(jwks, &set) != nil {
		return
	}
	ids := make(map[string]bool, len(set.Keys))
	for _, key := range set.Keys {
		ids[key.KeyID] = true
	}
	k.mu.Lock()
	k.ids = ids
	k.mu.Unlock()
}

func (k *keyIDs) has(kid string) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ids[kid]
}

// keySet notes in the context a key fetch that failed as ErrUnavailable:
// go-oidc reports a key set's error as text only (%v), which would turn
// "the keys could not be fetched" into "invalid token". go-oidc refetches
// after any signature failure, so a token naming a key it holds but not
// signed by it (altered claims, another algorithm) also asks for a fetch:
// that one is invalid whether or not the fetch may run now.
type keySet struct {
	oidc.KeySet
	published *keyIDs
}

type keyFetchKey struct{}

type keyFetch struct{ failure error }

func (k keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.KeySet.VerifySignature(ctx, jwt)
	if err != nil && errors.Is(err, ErrUnavailable) {
		if kid := headerKeyID(jwt); kid != "" && k.published.has(kid) {
			return nil, fmt.Errorf("the signature does not verify with key %q of the issuer's key set", kid)
		}
		if f, ok := ctx.Value(keyFetchKey{}).(*keyFetch); ok {
			f.failure = err
		}
	}
	return payload, err
}

// headerKeyID is the kid of a JWT's JOSE header, "" when it has none or
// does not parse (go-oidc has parsed it before asking for keys).
func headerKeyID(jwt string) string {
	head, _, _ := strings.Cut(jwt, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		KeyID string `json:"kid"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.KeyID
}
