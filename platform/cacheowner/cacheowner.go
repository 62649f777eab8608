// Package cacheowner partitions the services' reply caches by caller. A
// reply cache shared by every caller tells each one, through cache_hit (and
// the database time and speed of the answer), whether another caller just
// made the same search or lookup. So the edges that check API keys (the MCP
// adapter, the REST gateway) name the caller to the services, and the
// search and vendor-graph caches key each reply by it: a hit is always one
// the caller's own earlier call filled. Repeats and the pages of one
// caller's search still come from the cache; the cost is one ranking per
// caller instead of one for everyone.
//
// The caller travels as a digest in gRPC metadata, set only by the edges
// (the read and adapter roles, which also assert the key's read scope); a
// call without one (bmcisctl) has the owner "".
package cacheowner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/grpc/metadata"
)

// Header is the metadata key carrying the owner digest.
const Header = "x-bmcis-cache-owner"

// digestBytes is how much of the SHA-256 names an owner: 128 bits.
const digestBytes = 16

// Digest names a caller (its API key or credential) without revealing it:
// the start of its SHA-256, in hex.
func Digest(credential string) string {
	sum := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(sum[:digestBytes])
}

type ownerKey struct{}

// With returns ctx naming, by its digest, the caller whose credential (API
// key) a request was made with. An empty credential names none.
func With(ctx context.Context, credential string) context.Context {
	if credential == "" {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, Digest(credential))
}

// Outgoing returns ctx sending to a service the owner With named, for the
// call about to be made with it (once per call: a second value would name
// no owner).
func Outgoing(ctx context.Context) context.Context {
	owner, _ := ctx.Value(ownerKey{}).(string)
	if owner == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, Header, owner)
}

// FromIncoming returns the owner a service keys this call's cached reply by:
// the digest an edge sent, or "" when none, several or a malformed one was
// sent (it is part of every cache key: its size is bounded here).
func FromIncoming(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(Header)
	if len(v) != 1 || len(v[0]) != 2*digestBytes {
		return ""
	}
	if _, err := hex.DecodeString(v[0]); err != nil {
		return ""
	}
	return v[0]
}
