package rest

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/bmcis/knowledge/gateway/internal/backends"
)

// Access says what a route requires of its caller.
type Access int

const (
	// Public routes need nothing: liveness, health, the catalogue, the
	// OpenAPI document and the dashboard's static files.
	Public Access = iota
	// APIKey routes need a key that auth.Check allows (X-API-Key or
	// Authorization: Bearer); each call consumes one rate-limit unit.
	APIKey
	// Admin routes need the admin token (X-Admin-Token), which the auth
	// service compares. They take no API key, so the first key can be made
	// over REST.
	Admin
)

func (a Access) String() string {
	switch a {
	case APIKey:
		return "api-key"
	case Admin:
		return "admin-token"
	default:
		return "public"
	}
}

// Route is one REST route the gateway transcodes to a gRPC method.
type Route struct {
	Method  string // HTTP method
	Path    string // path template, parameters in proto field names
	Service string // backend name
	RPC     string // gRPC method name
	Access  Access
	// Tool is the MCP tool backed by this RPC, if any.
	Tool string
}

// Operation is what auth.Check records for a call on this route.
func (r Route) Operation() string { return "rest." + r.Service + "." + r.RPC }

// FullMethod is the gRPC method, as the services' metrics label it.
func (r Route) FullMethod() string { return "/" + backends.GRPCServices[r.Service] + "/" + r.RPC }

// Key identifies the route regardless of parameter names.
func (r Route) Key() string { return routeKey(r.Method, r.Path) }

// Routes lists every annotated RPC of the three services. A test checks it
// against the OpenAPI document, so an RPC added to a contract fails the
// build until it is classified here; an unclassified route is refused.
var Routes = []Route{
	{"POST", "/v1/search", backends.Search, "Search", APIKey, "semantic_search"},
	{"GET", "/v1/chunks", backends.Search, "GetChunks", APIKey, "get_chunks"},
	// external_id=** takes ids with slashes (synced ids are NAME:path/to/file).
	{"DELETE", "/v1/documents/{external_id=**}", backends.Search, "DeleteDocument", Admin, ""},
	// Documents with their access lists: every document's, so an
	// operator's (the ingest role's credential in X-Admin-Token), never a key's.
	{"GET", "/v1/documents", backends.Search, "ListDocuments", Admin, ""},
	{"GET", "/v1/documents/{external_id=**}", backends.Search, "GetDocument", Admin, ""},
	{"GET", "/v1/categories", backends.Search, "ListCategories", APIKey, ""},
	{"GET", "/v1/index/status", backends.Search, "GetIndexStatus", APIKey, ""},
	{"GET", "/v1/sources", backends.Search, "ListSources", APIKey, ""},
	// Sources the service syncs itself: an operator's (the ingest role's
	// credential in X-Admin-Token, as on uploads and deletions).
	{"POST", "/v1/sources", backends.Search, "AddSource", Admin, ""},
	{"POST", "/v1/sources/{name}:sync", backends.Search, "SyncSource", Admin, ""},
	{"DELETE", "/v1/sources/{name}", backends.Search, "RemoveSource", Admin, ""},
	// The upload route streams a file or a zip's files into IngestDocuments
	// (gateway code, not transcoding: see upload.go); its OpenAPI entry is
	// added by openAPIDocument.
	{"POST", UploadPath, backends.Search, "IngestDocuments", Admin, ""},
	{"GET", "/v1/vendors/{name}", backends.VendorGraph, "GetVendor", APIKey, "find_vendor_info"},
	{"GET", "/v1/vendor-suggestions", backends.VendorGraph, "SuggestVendors", APIKey, ""},
	{"GET", "/v1/graph/status", backends.VendorGraph, "GetGraphStatus", APIKey, ""},
	{"POST", "/v1/keys", backends.Auth, "CreateKey", Admin, ""},
	{"GET", "/v1/keys", backends.Auth, "ListKeys", Admin, ""},
	{"POST", "/v1/keys/{key_id}:revoke", backends.Auth, "RevokeKey", Admin, ""},
	{"POST", "/v1/keys/{key_id}:rotate", backends.Auth, "RotateKey", Admin, ""},
	{"GET", "/v1/audit", backends.Auth, "ListAuditEvents", Admin, ""},
}

// UploadPath is the upload route: one file, or a zip of files, into a named
// source, for the ingest role (the operator's credential in X-Admin-Token,
// as on document deletion; the gateway holds none). Package upload serves it.
const UploadPath = "/v1/sources/{name}/files"

// isUploadPath reports a request path of the upload route, whose body limit
// is BMCIS_GATEWAY_MAX_UPLOAD_BYTES.
func isUploadPath(p string) bool {
	return strings.HasPrefix(p, "/v1/sources/") && strings.HasSuffix(p, "/files") && strings.Count(p, "/") == 4
}

// Dashboard and utility routes served by the gateway itself, as /api/config
// lists them. Edge.Handle refuses (panics at start-up) a route missing here
// or listed with another access rule, so the list cannot drift from what is
// served.
var localRoutes = []struct {
	Method, Path string
	Access       Access
}{
	{"GET", "/healthz", Public},
	{"GET", "/api/health", Public},
	{"GET", "/api/servers", Public},
	{"GET", "/api/tools", Public},
	// Internal addresses and metrics URLs: the operators' (the admin
	// credential, as on the key and audit routes).
	{"GET", "/api/config", Admin},
	{"GET", "/api/stats", APIKey},
	{"GET", "/openapi.json", Public},
	{"GET", "/", Public},
	{"GET", "/assets/{file}", Public},
}

var paramRE = regexp.MustCompile(`\{[^}]*\}`)

func routeKey(method, path string) string { return method + " " + paramRE.ReplaceAllString(path, "{}") }

var routeIndex = func() map[string]Route {
	m := make(map[string]Route, len(Routes))
	for _, r := range Routes {
		m[r.Key()] = r
	}
	return m
}()

// RouteFor finds the route of a grpc-gateway pattern ("/v1/keys/{key_id=*}:revoke").
func RouteFor(method, pattern string) (Route, bool) {
	r, ok := routeIndex[routeKey(method, pattern)]
	return r, ok
}

// checkListed panics unless localRoutes lists the route of a mux pattern
// with this access rule. localRoutes writes the root without its {$}
// anchor and a subtree with its file parameter.
func checkListed(method, pattern string, access Access) {
	listed := pattern
	switch {
	case pattern == "/{$}":
		listed = "/"
	case strings.HasSuffix(pattern, "/"):
		listed = pattern + "{file}"
	}
	for _, r := range localRoutes {
		if r.Method == method && r.Path == listed {
			if r.Access != access {
				panic(fmt.Sprintf("rest: %s %s is mounted as %s but listed in localRoutes as %s", method, listed, access, r.Access))
			}
			return
		}
	}
	panic(fmt.Sprintf("rest: %s %s is mounted but not listed in localRoutes", method, listed))
}

// PublicRoutes lists the routes that need no credential.
func PublicRoutes() []string {
	var out []string
	for _, r := range localRoutes {
		if r.Access == Public {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// AdminRoutes lists the routes that take an operator credential.
func AdminRoutes() []string {
	var out []string
	for _, r := range Routes {
		if r.Access == Admin {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	sort.Strings(out)
	return out
}
