// Package rpcauth says who may call what: the one table of every product RPC
// and the caller roles allowed to call it, and the verifier that turns a
// presented service credential into its roles.
//
// Each caller holds the credential of one role: the MCP adapter adapter,
// the gateway read, bmcisctl and operators ingest, key administrators
// admin, the vendorgraph service (calling search) vendorgraph. Besides methods, the table of claims says which roles may assert
// something inside a request (an OAuth subject to Check). Services hold
// only SHA-256 digests of the credentials they accept, so a service's
// environment cannot be replayed as a caller's credential.
package rpcauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Role is what a caller may do.
type Role string

// The caller roles.
const (
	// Read is the gateway's (and the adapter's where it has no credential
	// of its own): searching and looking up.
	Read Role = "read"
	// Adapter is the MCP adapter's: the reads it makes, and presenting the
	// OAuth subject of an access token it verified to Check.
	Adapter Role = "adapter"
	// Ingest is bmcisctl's and operators': writing documents and the graph.
	Ingest Role = "ingest"
	// Admin manages API keys.
	Admin Role = "admin"
	// VendorGraph is the vendorgraph service's, calling search: it gives
	// search the entity names an import changed and asks it for a vendor's
	// evidence. Data crossing between the
	// two services moves only through such calls (docs/DATA-OWNERSHIP.md).
	VendorGraph Role = "vendorgraph"
)

// Roles lists every role, in the order their settings are documented.
var Roles = []Role{Read, Adapter, Ingest, Admin, VendorGraph}

// Table maps full gRPC method names to the roles allowed to call them.
type Table map[string][]Role

// rules maps every RPC of the product to the roles allowed to call it. An RPC
// missing here is refused for every caller; a test in the gateway module
// checks it against the generated service descriptors.
var rules = Table{
	"/bmcis.search.v1.SearchService/Search":         {Read, Adapter},
	"/bmcis.search.v1.SearchService/GetChunks":      {Read, Adapter},
	"/bmcis.search.v1.SearchService/ListCategories": {Read, Adapter},
	"/bmcis.search.v1.SearchService/GetIndexStatus": {Read, Ingest},
	// The index's version, pushed: only the adapter keeps answers that
	// must be dropped when it moves (its answer cache, indexwatch).
	"/bmcis.search.v1.SearchService/WatchIndex":           {Adapter},
	"/bmcis.search.v1.SearchService/IngestDocuments":      {Ingest},
	"/bmcis.search.v1.SearchService/IngestDocumentsAcked": {Ingest},
	"/bmcis.search.v1.SearchService/DeleteDocument":       {Ingest},
	// Documents with their access lists: who may read what, for every
	// document, which no end user's key may learn (not even through the
	// gateway's read credential). Operators only: bmcisctl documents, or
	// the REST routes with the operator's credential.
	"/bmcis.search.v1.SearchService/ListDocuments": {Ingest},
	"/bmcis.search.v1.SearchService/GetDocument":   {Ingest},
	// Listing sources is a read: the dashboard (gateway, read credential)
	// shows them, and bmcisctl sources (ingest credential) lists them after
	// a sync. It reveals names, counts and sync times, no content; a scoped
	// key sees only the sources and counts of its categories, and only the
	// ingest role sees roots (paths on the syncing machines).
	"/bmcis.search.v1.SearchService/ListSources": {Read, Ingest},
	// Sources the service syncs itself (git, web, server folders) are an
	// operator's to add, run and remove: bmcisctl sources, or the REST
	// routes with the operator's credential.
	"/bmcis.search.v1.SearchService/AddSource":    {Ingest},
	"/bmcis.search.v1.SearchService/SyncSource":   {Ingest},
	"/bmcis.search.v1.SearchService/RemoveSource": {Ingest},
	// Reindex re-embeds the whole corpus: an operator's call (bmcisctl's
	// ingest credential), never the gateway's or the adapter's.
	"/bmcis.search.v1.SearchService/Reindex": {Ingest},
	// The names an import created or changed, which search keeps its own
	// copy of and re-links: only vendorgraph, inside its import.
	"/bmcis.search.v1.SearchService/SyncEntityNames": {VendorGraph},
	// A vendor's evidence (chunks and documents mentioning it), which
	// vendorgraph's GetVendor answers with; its callers' reads go through
	// vendorgraph, which passes their read scope on.
	"/bmcis.search.v1.SearchService/GetEntityEvidence": {VendorGraph},

	"/bmcis.vendorgraph.v1.VendorGraphService/GetVendor":      {Read, Adapter},
	"/bmcis.vendorgraph.v1.VendorGraphService/SuggestVendors": {Read, Adapter},
	"/bmcis.vendorgraph.v1.VendorGraphService/GetGraphStatus": {Read, Ingest},
	"/bmcis.vendorgraph.v1.VendorGraphService/ImportGraph":    {Ingest},

	"/bmcis.auth.v1.AuthService/Check":     {Read, Adapter},
	"/bmcis.auth.v1.AuthService/CreateKey": {Admin},
	"/bmcis.auth.v1.AuthService/ListKeys":  {Admin},
	"/bmcis.auth.v1.AuthService/RevokeKey": {Admin},
	"/bmcis.auth.v1.AuthService/RotateKey": {Admin},
	// The audit trail (docs/AUDIT.md): the edges that serve end users'
	// reads append to it (the adapter, and the gateway's read credential);
	// only operators read it. Search and vendorgraph record nothing.
	"/bmcis.auth.v1.AuthService/AppendAuditEvents": {Read, Adapter},
	"/bmcis.auth.v1.AuthService/ListAuditEvents":   {Admin},
	// Only the adapter asks for leases (CheckRequest.lease_units), so only
	// it gives their unspent units back: a refund raises a key's limits.
	"/bmcis.auth.v1.AuthService/ReleaseLease": {Adapter},
}

// Claim is something a caller asserts inside a request that the service
// takes on trust from it, beyond the right to call the method.
type Claim string

// OAuthSubject is CheckRequest.oauth: "this caller verified an access
// token of this subject, with these scopes". Whoever may assert it may
// read as any subject of a trusted issuer, so only the adapter, which
// verifies the tokens, may.
const OAuthSubject Claim = "bmcis.auth.v1.CheckRequest.oauth"

// ClientAddress is CheckRequest.client_address: "the end user calls from
// this address", by which auth budgets failed checks. Whoever may assert it
// can spend another address's budget or dodge its own, so only the edges
// that see end users' connections may: the adapter, and the gateway (which
// holds the read credential).
const ClientAddress Claim = "bmcis.auth.v1.CheckRequest.client_address"

// LeaseUnits is CheckRequest.lease_units: "charge this key ahead for calls
// I will serve without asking". Only the adapter may: it alone may give the
// unspent units back (ReleaseLease), so units leased to any other caller
// would be lost to the key.
const LeaseUnits Claim = "bmcis.auth.v1.CheckRequest.lease_units"

// claims maps every claim to the roles allowed to make it.
var claims = map[Claim][]Role{
	OAuthSubject:  {Adapter},
	ClientAddress: {Read, Adapter},
	LeaseUnits:    {Adapter},
}

// ClaimRule returns the roles allowed to make a claim (none: nobody).
func ClaimRule(c Claim) []Role { return claims[c] }

type rolesKey struct{}

// WithRoles returns ctx carrying the roles of the call's verified
// credential (the server edge sets it).
func WithRoles(ctx context.Context, roles []Role) context.Context {
	return context.WithValue(ctx, rolesKey{}, roles)
}

// RolesFrom returns the roles the server edge verified for this call.
func RolesFrom(ctx context.Context) []Role {
	r, _ := ctx.Value(rolesKey{}).([]Role)
	return r
}

// MayClaim reports whether the call's verified credential may make c. A
// call whose roles were not verified (checks off) may make none.
func MayClaim(ctx context.Context, c Claim) bool {
	for _, r := range RolesFrom(ctx) {
		if slices.Contains(claims[c], r) {
			return true
		}
	}
	return false
}

// Holds reports whether the call's verified credential holds role r, for
// what a handler shows only to some roles. A call whose roles were not
// verified (checks off) holds none.
func Holds(ctx context.Context, r Role) bool {
	return slices.Contains(RolesFrom(ctx), r)
}

// Rule returns the roles allowed to call method, and whether it has a rule.
func Rule(method string) ([]Role, bool) {
	r, ok := rules[method]
	return r, ok
}

// Methods returns every method with a rule, sorted.
func Methods() []string {
	out := make([]string, 0, len(rules))
	for m := range rules {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Exempt reports whether a method needs no credential: health checks and
// reflection serve probes and grpcurl, and reveal nothing.
func Exempt(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(method, "/grpc.reflection.")
}

// Digest is the SHA-256 of a credential.
type Digest [sha256.Size]byte

// DigestOf hashes a credential.
func DigestOf(credential string) Digest { return sha256.Sum256([]byte(credential)) }

// String is the digest in lowercase hex, as the settings take it.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ParseDigest reads a digest in hex (64 characters).
func ParseDigest(s string) (Digest, error) {
	var d Digest
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(d) {
		return d, errors.New("must be the SHA-256 of the credential in hex (64 characters)")
	}
	copy(d[:], b)
	return d, nil
}

// Credentials are the digests a service accepts, per role. A role without a
// digest cannot call the service.
type Credentials map[Role]Digest

// AllRoles gives one credential every role: for the harnesses that test a
// single service's logic, where the caller plays every part. Production
// settings refuse a credential shared by two roles.
func AllRoles(credential string) Credentials {
	d := DigestOf(credential)
	c := Credentials{}
	for _, r := range Roles {
		c[r] = d
	}
	return c
}

// Errors of Authorize; the server edge maps them to gRPC codes.
var (
	// ErrMissing: no credential was presented.
	ErrMissing = errors.New("missing service credential")
	// ErrUnknown: the credential matches no role.
	ErrUnknown = errors.New("invalid service credential")
	// ErrNoRule: the method is not in the table, so nobody may call it.
	ErrNoRule = errors.New("no access rule for this method")
)

// ForbiddenError: the credential is valid but its roles may not call the method.
type ForbiddenError struct {
	Method string
	Roles  []Role
}

func (e *ForbiddenError) Error() string {
	names := make([]string, len(e.Roles))
	for i, r := range e.Roles {
		names[i] = string(r)
	}
	return fmt.Sprintf("the %s credential may not call %s", strings.Join(names, "+"), e.Method)
}

// Verifier checks presented credentials against a service's Credentials.
type Verifier struct {
	creds Credentials
	table Table
}

// NewVerifier returns a verifier of creds against the product's table; with
// no credentials, Enabled is false.
func NewVerifier(creds Credentials) *Verifier { return &Verifier{creds: creds, table: rules} }

// WithTable returns a verifier of the same credentials against another
// table: for tests of the mechanism on services outside the product.
func (v *Verifier) WithTable(t Table) *Verifier { return &Verifier{creds: v.creds, table: t} }

// Enabled reports whether any credential is configured.
func (v *Verifier) Enabled() bool { return v != nil && len(v.creds) > 0 }

// RolesOf returns the roles a credential holds. Every configured digest is
// compared, in constant time, whatever matches: neither the credential's
// length nor which role it holds shows in the time taken.
func (v *Verifier) RolesOf(credential string) []Role {
	got := DigestOf(credential)
	var out []Role
	for _, role := range Roles {
		want, ok := v.creds[role]
		if !ok {
			continue
		}
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			out = append(out, role)
		}
	}
	return out
}

// Authorize decides whether credential may call method.
func (v *Verifier) Authorize(method, credential string) error {
	_, err := v.AuthorizeRoles(method, credential)
	return err
}

// AuthorizeRoles is Authorize that also returns the roles the credential
// holds, for the claims the handler checks (MayClaim).
func (v *Verifier) AuthorizeRoles(method, credential string) ([]Role, error) {
	if Exempt(method) {
		return nil, nil
	}
	allowed, ok := v.table[method]
	if !ok {
		return nil, ErrNoRule
	}
	if credential == "" {
		return nil, ErrMissing
	}
	held := v.RolesOf(credential)
	if len(held) == 0 {
		return nil, ErrUnknown
	}
	for _, r := range held {
		if slices.Contains(allowed, r) {
			return held, nil
		}
	}
	return nil, &ForbiddenError{Method: method, Roles: held}
}
