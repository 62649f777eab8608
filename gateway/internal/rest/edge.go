// Package rest is the gateway's REST edge: grpc-gateway transcoding for every
// annotated RPC of the search, vendorgraph and auth services, the route table
// (routes.go) with each route's access rule, API-key and operator-credential
// checks through the auth service, the request middleware (request ids,
// access log, metrics, origin and CORS checks, body limits, deadlines), the
// one error handler and the OpenAPI document. Routes the gateway serves with
// its own code (the dashboard, the upload) are mounted with Handle and
// HandleRPC and get the same checks and error handling.
package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/edgemetrics"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/tracing"
)

// Edge is the HTTP surface: the transcoded /v1 routes, the routes mounted
// on it, and the middleware around them all.
type Edge struct {
	cfg     settings.Config
	log     *slog.Logger
	metrics *edgemetrics.Metrics

	authClient authv1.AuthServiceClient
	rest       *runtime.ServeMux // grpc-gateway's, under /v1/
	mux        *http.ServeMux    // every route
	handler    http.Handler
	openapi    []byte

	inflight atomic.Int64
	// auditlog records every REST read; nil when BMCIS_AUDIT=false.
	auditlog *auditlog.Recorder
}

// New builds the edge on the gateway's connections to the three services
// (by backends name) and registers the transcoded routes, /healthz and
// /openapi.json. Mount the gateway's own routes with Handle and HandleRPC.
func New(cfg settings.Config, log *slog.Logger, metrics *edgemetrics.Metrics, conns map[string]*grpc.ClientConn) (*Edge, error) {
	for _, name := range []string{backends.Search, backends.VendorGraph, backends.Auth} {
		if conns[name] == nil {
			return nil, fmt.Errorf("no connection to the %s service", name)
		}
	}
	e := &Edge{cfg: cfg, log: log, metrics: metrics, authClient: authv1.NewAuthServiceClient(conns[backends.Auth]), mux: http.NewServeMux()}
	cfg.Audit.Registerer, cfg.Audit.Logger = metrics.Registry, log
	rec, err := cfg.Audit.Start(e.authClient)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	e.auditlog = rec
	e.rest = runtime.NewServeMux(
		runtime.WithErrorHandler(e.handleError),
		runtime.WithRoutingErrorHandler(e.handleRoutingError),
		runtime.WithMiddlewares(e.restAuth),
		// Nothing from the HTTP request reaches the services as metadata but
		// what the gateway puts there (request id, admin token on admin routes).
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{Marshaler: &strictJSONPb{runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}}),
		// Sets grpc-gateway's package-wide parser; every mux of the
		// gateway wants the same one.
		runtime.SetQueryParameterParser(&strictQueryParser{}),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
	)
	ctx := context.Background()
	if err := errors.Join(
		// The caller's read scope, then the documented defaults of omitted fields.
		searchv1.RegisterSearchServiceHandlerClient(ctx, e.rest, scopedSearch{searchDefaults{searchv1.NewSearchServiceClient(conns[backends.Search])}}),
		vendorgraphv1.RegisterVendorGraphServiceHandlerClient(ctx, e.rest, scopedVendor{vendorgraphv1.NewVendorGraphServiceClient(conns[backends.VendorGraph])}),
		authv1.RegisterAuthServiceHandlerClient(ctx, e.rest, e.authClient),
	); err != nil {
		return nil, fmt.Errorf("register REST handlers: %w", err)
	}
	doc, err := openAPIDocument()
	if err != nil {
		return nil, err
	}
	e.openapi = doc

	e.Handle("GET", "/healthz", Public, "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	e.Handle("GET", "/openapi.json", Public, "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(e.openapi)
	})
	e.mux.Handle("/v1/", e.rest)
	e.mux.HandleFunc("/", e.NotFound)
	// Every request but probes gets a server span (platform/tracing); the
	// client's address is resolved first, for auth and the audit trail.
	e.handler = cfg.TrustedProxies.Handler(tracing.HTTPHandler(e.outer(e.cors(e.security(e.mux))), "gateway"))
	return e, nil
}

// Handler is the whole HTTP surface, middleware included.
func (e *Edge) Handler() http.Handler { return e.handler }

// ActiveClients is the number of requests in flight.
func (e *Edge) ActiveClients() int64 { return e.inflight.Load() }

// Handle serves a route of the gateway's own (not in Routes), which must be
// listed in localRoutes with the same access rule: the method is enforced
// (GET also answers HEAD), the caller checked for access (op is what
// auth.Check records for an APIKey route) and the route named in the access
// log and metrics.
func (e *Edge) Handle(method, path string, access Access, op string, h http.HandlerFunc) {
	e.handle(method, path, access, op, nil, h)
}

// HandleRPC serves a row of Routes with the gateway's own code (the upload):
// the shared error handling then treats the route as the table says (admin
// codes, denial counts, the service's name).
func (e *Edge) HandleRPC(rt Route, h http.HandlerFunc) {
	e.handle(rt.Method, rt.Path, rt.Access, rt.Operation(), &rt, h)
}

func (e *Edge) handle(method, path string, access Access, op string, rt *Route, h http.HandlerFunc) {
	verifyAdmin := false
	if rt == nil {
		checkListed(method, path, access)
		if access == Admin {
			// The gateway's own admin route makes no upstream call that
			// would check the credential: the auth service checks it
			// (adminProbe), and refusals read as on the key routes.
			rt = &Route{Method: method, Path: path, Service: backends.Auth, RPC: adminProbeRPC, Access: Admin}
			verifyAdmin = true
		}
	}
	route := method + " " + path
	e.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if rec := recorderFrom(r.Context()); rec != nil {
			rec.route = route
			rec.rt = rt
		}
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			e.WriteError(w, r, &runtime.HTTPStatusError{HTTPStatus: http.StatusMethodNotAllowed,
				Err: apierror.New(codes.Unimplemented, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path, nil).Err()})
			return
		}
		r2, err := e.authorize(w, r, access, op, "", "")
		if err == nil && verifyAdmin {
			err = e.adminProbe(r2.Context())
		}
		if err != nil {
			e.WriteError(w, r, err)
			return
		}
		h(w, r2)
	})
}

// adminProbeRPC is the admin-only RPC (platform/rpcauth) that checks the
// admin credential of the gateway's own admin routes.
const adminProbeRPC = "ListKeys"

// adminProbe asks the auth service whether ctx's operator credential is the
// admin one: a ListKeys narrowed to an owner no key has, so an accepted
// credential costs one indexed read. The gateway holds no admin credential
// to compare with itself.
func (e *Edge) adminProbe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, authCheckTimeout)
	defer cancel()
	_, err := e.authClient.ListKeys(ctx, &authv1.ListKeysRequest{Owner: "bmcis-gateway admin credential probe"})
	return err
}

// NotFound answers 404 ROUTE_NOT_FOUND.
func (e *Edge) NotFound(w http.ResponseWriter, r *http.Request) {
	e.WriteError(w, r, apierror.New(codes.NotFound, "ROUTE_NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path, nil).Err())
}

// WriteError answers err in the one error shape; see handleError.
func (e *Edge) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e.handleError(r.Context(), e.rest, nil, w, r, err)
}

// restAuth runs on every matched REST route, before transcoding: it finds the
// route's access rule and checks the caller. A route the table does not
// classify is refused.
func (e *Edge) restAuth(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		pat, _ := runtime.HTTPPattern(r.Context())
		rt, ok := RouteFor(r.Method, pat.String())
		if !ok {
			e.WriteError(w, r, apierror.New(codes.PermissionDenied, "ROUTE_NOT_CLASSIFIED",
				"this route has no access rule in the gateway", nil).Err())
			return
		}
		if rec := recorderFrom(r.Context()); rec != nil {
			rec.route = rt.Method + " " + rt.Path
			rec.rt = &rt
		}
		r2, err := e.authorize(w, r, rt.Access, rt.Operation(), rt.ScopeTool(), rt.Service)
		if err != nil {
			e.WriteError(w, r, err)
			return
		}
		next(w, r2, params)
	}
}
