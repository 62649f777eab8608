package testfake

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"

	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
)

// ServiceToken is the internal token the fakes require.
const ServiceToken = "test-service-token-0123456789"

// Env is a running set of fake backends and clients dialed to them.
type Env struct {
	Clients     *backend.Clients
	Search      *Search
	VendorGraph *VendorGraph
	Auth        *Auth

	mu        sync.Mutex
	servers   map[string]*grpc.Server
	listeners map[string]*bufconn.Listener
	// RequestIDs records the x-request-id each service saw.
	requestIDs []string
}

var (
	sharedSearch     *Search
	sharedSearchOnce sync.Once
)

// Start runs the three fakes. The search index is built once per test
// binary (tokenizing the corpus takes a moment) and shared; its cache-hit
// memory is shared too.
func Start(t testing.TB) *Env {
	t.Helper()
	sharedSearchOnce.Do(func() { sharedSearch = NewSearch() })
	e := &Env{
		Search:      sharedSearch,
		VendorGraph: NewVendorGraph(),
		Auth:        &Auth{},
		servers:     map[string]*grpc.Server{},
		listeners:   map[string]*bufconn.Listener{},
	}
	e.serve("search", func(s *grpc.Server) { searchv1.RegisterSearchServiceServer(s, e.Search) })
	e.serve("vendorgraph", func(s *grpc.Server) { vendorgraphv1.RegisterVendorGraphServiceServer(s, e.VendorGraph) })
	e.serve("auth", func(s *grpc.Server) { authv1.RegisterAuthServiceServer(s, e.Auth) })

	dialer := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		e.mu.Lock()
		l := e.listeners[addr]
		e.mu.Unlock()
		if l == nil {
			return nil, status.Error(codes.Unavailable, "no listener")
		}
		return l.DialContext(ctx)
	})
	clients, err := backend.Dial(backend.Addrs{
		Search: "passthrough:///search", VendorGraph: "passthrough:///vendorgraph", Auth: "passthrough:///auth",
	}, ServiceToken, backend.Timeouts{Search: 5 * time.Second, VendorGraph: 5 * time.Second, Auth: 2 * time.Second}, dialer)
	if err != nil {
		t.Fatal(err)
	}
	e.Clients = clients
	t.Cleanup(func() {
		clients.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range e.servers {
			s.Stop()
		}
	})
	return e
}

func (e *Env) serve(name string, register func(*grpc.Server)) {
	l := bufconn.Listen(1 << 20)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(e.checkToken))
	register(s)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	e.mu.Lock()
	e.servers[name] = s
	e.listeners[name] = l
	e.mu.Unlock()
}

// checkToken refuses calls without the service token, as the real services
// do, and records request ids.
func (e *Env) checkToken(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == healthpb.Health_Check_FullMethodName {
		return handler(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get(grpcclient.ServiceTokenHeader); len(got) != 1 || got[0] != ServiceToken {
		return nil, status.Error(codes.Unauthenticated, "missing service token")
	}
	if ids := md.Get(grpcclient.RequestIDHeader); len(ids) == 1 {
		e.mu.Lock()
		e.requestIDs = append(e.requestIDs, ids[0])
		e.mu.Unlock()
	}
	return handler(ctx, req)
}

// RequestIDs returns the request ids the services received.
func (e *Env) RequestIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.requestIDs...)
}

// Stop takes a service down: its server stops and new connections fail.
func (e *Env) Stop(name string) {
	e.mu.Lock()
	s := e.servers[name]
	delete(e.listeners, name)
	e.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}
