package gateway

import (
	"regexp"
	"sort"
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
func (r Route) FullMethod() string { return "/" + grpcServiceNames[r.Service] + "/" + r.RPC }

// Key identifies the route regardless of parameter names.
func (r Route) Key() string { return routeKey(r.Method, r.Path) }

var grpcServiceNames = map[string]string{
	Search:      "bmcis.search.v1.SearchService",
	VendorGraph: "bmcis.vendorgraph.v1.VendorGraphService",
	Auth:        "bmcis.auth.v1.AuthService",
}

// Routes lists every annotated RPC of the three services. A test checks it
// against the OpenAPI document, so an RPC added to a contract fails the
// build until it is classified here; an unclassified route is refused.
var Routes = []Route{
	{"POST", "/v1/search", Search, "Search", APIKey, "semantic_search"},
	{"GET", "/v1/chunks", Search, "GetChunks", APIKey, "get_chunks"},
	// external_id=** takes ids with slashes (synced ids are NAME:path/to/file).
	{"DELETE", "/v1/documents/{external_id=**}", Search, "DeleteDocument", Admin, ""},
	{"GET", "/v1/categories", Search, "ListCategories", APIKey, ""},
	{"GET", "/v1/index/status", Search, "GetIndexStatus", APIKey, ""},
	{"GET", "/v1/sources", Search, "ListSources", APIKey, ""},
	// The upload route streams a file or a zip's files into IngestDocuments
	// (gateway code, not transcoding: see upload.go); its OpenAPI entry is
	// added by openAPIDocument.
	{"POST", UploadPath, Search, "IngestDocuments", Admin, ""},
	{"GET", "/v1/vendors/{name}", VendorGraph, "GetVendor", APIKey, "find_vendor_info"},
	{"GET", "/v1/vendor-suggestions", VendorGraph, "SuggestVendors", APIKey, ""},
	{"GET", "/v1/graph/status", VendorGraph, "GetGraphStatus", APIKey, ""},
	{"POST", "/v1/keys", Auth, "CreateKey", Admin, ""},
	{"GET", "/v1/keys", Auth, "ListKeys", Admin, ""},
	{"POST", "/v1/keys/{key_id}:revoke", Auth, "RevokeKey", Admin, ""},
	{"POST", "/v1/keys/{key_id}:rotate", Auth, "RotateKey", Admin, ""},
}

// Dashboard and utility routes served by the gateway itself.
var localRoutes = []struct {
	Method, Path string
	Access       Access
}{
	{"GET", "/healthz", Public},
	{"GET", "/api/health", Public},
	{"GET", "/api/servers", Public},
	{"GET", "/api/tools", Public},
	{"GET", "/api/config", APIKey},
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

// routeFor finds the route of a grpc-gateway pattern ("/v1/keys/{key_id=*}:revoke").
func routeFor(method, pattern string) (Route, bool) {
	r, ok := routeIndex[routeKey(method, pattern)]
	return r, ok
}

func publicRoutes() []string {
	var out []string
	for _, r := range localRoutes {
		if r.Access == Public {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func adminRoutes() []string {
	var out []string
	for _, r := range Routes {
		if r.Access == Admin {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	sort.Strings(out)
	return out
}
