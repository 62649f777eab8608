package server

import (
	"context"
	"slices"
	"strings"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

// scope is a request's read scope resolved to indexed category names. The
// zero scope is open: every category.
type scope struct {
	limited bool
	allowed map[string]bool
}

// readScope resolves the categories a caller's key may read the way the
// category filter resolves its names (case-insensitively). A scope naming
// only categories that do not exist yet allows nothing, not everything.
func (s *Server) readScope(rs *searchv1.ReadScope) scope {
	if len(rs.GetCategories()) == 0 {
		return scope{}
	}
	sc := scope{limited: true, allowed: map[string]bool{}}
	for _, c := range rs.GetCategories() {
		for _, name := range s.ix.ResolveCategory(strings.TrimSpace(c)) {
			sc.allowed[name] = true
		}
	}
	return sc
}

// allows reports whether a chunk of category may be read.
func (sc scope) allows(category string) bool { return !sc.limited || sc.allowed[category] }

// filter keeps the names the scope allows.
func (sc scope) filter(names []string) []string {
	if !sc.limited {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return !sc.allowed[n] })
}

// categories lists the allowed names, sorted.
func (sc scope) categories() []string {
	out := make([]string, 0, len(sc.allowed))
	for n := range sc.allowed {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// callerAccess is the access set a read is answered for (docs/ACCESS.md):
// the one the request carries (ReadScope.access, or the evidence request's
// own), normalised; without one, everyone only for the edges' roles (read,
// adapter, vendorgraph: a caller they forgot to name sees no restricted
// document), and nil, every document, for an operator's credential
// (ingest) or a service whose credential checks are off. An entry of an
// unknown form is the caller's error.
func callerAccess(ctx context.Context, sent []string) ([]string, error) {
	set, err := access.ParseSet(sent)
	if err != nil {
		return nil, grpcserver.InvalidArgument("scope.access", "%v", err)
	}
	if set != nil {
		return set, nil
	}
	if rpcauth.Holds(ctx, rpcauth.Ingest) || rpcauth.Holds(ctx, rpcauth.Admin) {
		return nil, nil
	}
	if rpcauth.Holds(ctx, rpcauth.Read) || rpcauth.Holds(ctx, rpcauth.Adapter) || rpcauth.Holds(ctx, rpcauth.VendorGraph) {
		return []string{access.Everyone}, nil
	}
	return nil, nil
}
