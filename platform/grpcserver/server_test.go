package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

const (
	token       = "0123456789abcdef-test-token-read-role"
	ingestToken = "0123456789abcdef-test-token-ingest-role"
)

// testTable gives the test service's methods rules of their own: EmptyCall
// and UnaryCall for readers, StreamingOutputCall for ingest only.
var testTable = rpcauth.Table{
	"/grpc.testing.TestService/EmptyCall":           {rpcauth.Read},
	"/grpc.testing.TestService/UnaryCall":           {rpcauth.Read},
	"/grpc.testing.TestService/StreamingOutputCall": {rpcauth.Ingest},
}

var errLostDB = errors.New("lost the database at 10.0.0.7")

// testService fails in the way its request's fill_username/response_size say.
type testService struct {
	testpb.UnimplementedTestServiceServer
	release chan struct{}
	// flaky counts calls of size 7, which answer UNAVAILABLE twice, then OK.
	flaky atomic.Int32
}

// StreamingOutputCall sends nothing: the role tests only need it to succeed.
func (s *testService) StreamingOutputCall(*testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
	return nil
}

func (s *testService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (s *testService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	switch req.GetResponseSize() {
	case 1:
		panic("boom: secret internals")
	case 2:
		return nil, fmt.Errorf("query chunks: %w", errors.New("relation \"x\" does not exist"))
	case 3:
		return nil, fmt.Errorf("load: %w", errLostDB)
	case 4:
		return nil, InvalidArgument("query", "must not be empty")
	case 5:
		return nil, fmt.Errorf("slow: %w", context.DeadlineExceeded)
	case 6:
		<-s.release // held open to test draining
	case 7:
		if s.flaky.Add(1) <= 2 {
			return nil, status.Error(codes.Unavailable, "briefly unavailable")
		}
	case 8:
		s.flaky.Add(1)
		time.Sleep(600 * time.Millisecond) // a dependency that stopped answering
		return nil, status.Error(codes.Unavailable, "database did not answer in time")
	}
	return &testpb.SimpleResponse{}, nil
}

type harness struct {
	srv    *Server
	conn   *grpc.ClientConn
	logs   *syncBuffer
	cancel context.CancelFunc
	// stopped closes when Serve returns; serveErr is its result.
	stopped  chan struct{}
	serveErr error
	svc      *testService
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, drain time.Duration) *harness {
	t.Helper()
	logs := &syncBuffer{}
	srv := New(Settings{
		Name: "test", LogLevel: "debug",
		Credentials: rpcauth.Credentials{rpcauth.Read: rpcauth.DigestOf(token), rpcauth.Ingest: rpcauth.DigestOf(ingestToken)},
		DrainDelay:  drain, ShutdownTimeout: 5 * time.Second,
	}, WithLogOutput(logs), WithAccessTable(testTable), WithClassifier(func(err error) (*status.Status, bool) {
		if errors.Is(err, errLostDB) {
			return status.New(codes.Unavailable, "database unavailable"), true
		}
		return nil, false
	}))
	svc := &testService{release: make(chan struct{})}
	testpb.RegisterTestServiceServer(srv.GRPC(), svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := grpcclient.Dial(lis.Addr().String(), token)
	require.NoError(t, err)
	h := &harness{srv: srv, conn: conn, logs: logs, cancel: cancel, stopped: make(chan struct{}), svc: svc}
	go func() {
		h.serveErr = srv.Serve(ctx, lis)
		close(h.stopped)
	}()
	t.Cleanup(func() {
		cancel()
		_ = conn.Close()
		<-h.stopped
	})
	return h
}

func (h *harness) call(t *testing.T, size int32) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := testpb.NewTestServiceClient(h.conn).UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: size})
	return err
}

func TestHealthAndReflection(t *testing.T) {
	h := start(t, 0)
	ctx := context.Background()
	// No token: health and reflection are exempt.
	bare, err := grpc.NewClient(h.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer bare.Close()

	resp, err := healthpb.NewHealthClient(bare).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	resp, err = healthpb.NewHealthClient(bare).Check(ctx, &healthpb.HealthCheckRequest{Service: "grpc.testing.TestService"})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())

	stream, err := reflectionpb.NewServerReflectionClient(bare).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}))
	r, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	require.Contains(t, names, "grpc.testing.TestService")
	require.Contains(t, names, "grpc.health.v1.Health")
}

func TestServiceCredentialRoles(t *testing.T) {
	h := start(t, 0)
	ctx := context.Background()
	target := h.conn.Target()
	tests := []struct {
		name  string
		token string
		call  func(testpb.TestServiceClient) error
		want  codes.Code
	}{
		{"missing", "", emptyCall, codes.Unauthenticated},
		{"wrong", "not-the-token-at-all", emptyCall, codes.Unauthenticated},
		{"read reads", token, emptyCall, codes.OK},
		{"ingest may not read", ingestToken, emptyCall, codes.PermissionDenied},
		{"read may not ingest", token, streamCall, codes.PermissionDenied},
		{"ingest ingests", ingestToken, streamCall, codes.OK},
		{"no rule: refused even for a valid credential", token, fullDuplexCall, codes.PermissionDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpcclient.Dial(target, tc.token)
			require.NoError(t, err)
			defer conn.Close()
			err = tc.call(testpb.NewTestServiceClient(conn))
			require.Equal(t, tc.want, status.Code(err), "error: %v", err)
		})
	}
	// A caller's credential overrides the connection's own for one call.
	conn, err := grpcclient.Dial(target, token)
	require.NoError(t, err)
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	_, err = client.EmptyCall(grpcclient.WithCredential(ctx, ingestToken), &testpb.Empty{})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.NoError(t, streamCall(testpb.NewTestServiceClient(&credConn{conn, ingestToken})))
	require.NotContains(t, h.logs.String(), "not-the-token-at-all")
}

// credConn sends every call with another credential than the connection's.
type credConn struct {
	*grpc.ClientConn
	cred string
}

func (c *credConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConn.NewStream(grpcclient.WithCredential(ctx, c.cred), desc, method, opts...)
}

func emptyCall(c testpb.TestServiceClient) error {
	_, err := c.EmptyCall(context.Background(), &testpb.Empty{})
	return err
}

// streamCall opens a server stream and reads to its end.
func streamCall(c testpb.TestServiceClient) error {
	s, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func fullDuplexCall(c testpb.TestServiceClient) error {
	s, err := c.FullDuplexCall(context.Background())
	if err != nil {
		return err
	}
	_ = s.CloseSend()
	_, err = s.Recv()
	return err
}

func TestErrorMapping(t *testing.T) {
	h := start(t, 0)
	tests := []struct {
		name     string
		size     int32
		code     codes.Code
		contains string
		hidden   string
	}{
		{"panic is recovered as internal", 1, codes.Internal, "internal error (request id req_", "secret internals"},
		{"unknown error is hidden", 2, codes.Internal, "internal error (request id req_", "relation"},
		{"classified error", 3, codes.Unavailable, "database unavailable", "10.0.0.7"},
		{"deliberate status passes", 4, codes.InvalidArgument, "query: must not be empty", ""},
		{"deadline", 5, codes.DeadlineExceeded, "deadline exceeded", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.call(t, tc.size)
			st := status.Convert(err)
			require.Equal(t, tc.code, st.Code(), "error: %v", err)
			require.Contains(t, st.Message(), tc.contains)
			if tc.hidden != "" {
				require.NotContains(t, st.Message(), tc.hidden)
			}
		})
	}
	// The field violation travels as a typed detail.
	st := status.Convert(h.call(t, 4))
	require.Len(t, st.Details(), 1)
	br, ok := st.Details()[0].(*errdetails.BadRequest)
	require.True(t, ok)
	require.Equal(t, "query", br.GetFieldViolations()[0].GetField())

	// The server survived the panic, and the log kept what callers did not see.
	require.NoError(t, h.call(t, 0))
	require.Contains(t, h.logs.String(), "secret internals")
	require.Contains(t, h.logs.String(), `"code":"Internal"`)
}

func TestRequestIDEchoedAndLogged(t *testing.T) {
	h := start(t, 0)
	var header metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "req_from_caller")
	_, err := testpb.NewTestServiceClient(h.conn).EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&header))
	require.NoError(t, err)
	require.Equal(t, []string{"req_from_caller"}, header.Get(RequestIDHeader))
	require.Contains(t, h.logs.String(), `"request_id":"req_from_caller"`)

	// An id that could forge log lines is replaced.
	ctx = metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "bad id with spaces")
	_, err = testpb.NewTestServiceClient(h.conn).EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&header))
	require.NoError(t, err)
	require.Regexp(t, `^req_[0-9]{15}$`, header.Get(RequestIDHeader)[0])

	// A failure carries it in the trailer (so the failure stays retryable).
	var trailer metadata.MD
	ctx = metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "req_failing")
	_, err = testpb.NewTestServiceClient(h.conn).UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 4}, grpc.Trailer(&trailer))
	require.Error(t, err)
	require.Equal(t, []string{"req_failing"}, trailer.Get(RequestIDHeader))
}

// On shutdown the server reports NOT_SERVING during the drain delay, lets the
// call in flight finish, then stops.
func TestDrainOnShutdown(t *testing.T) {
	h := start(t, 300*time.Millisecond)
	inflight := make(chan error, 1)
	go func() { inflight <- h.call(t, 6) }()
	time.Sleep(100 * time.Millisecond) // let the call reach the handler

	h.cancel()
	require.Eventually(t, func() bool {
		resp, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	}, 2*time.Second, 20*time.Millisecond)

	close(h.svc.release)
	require.NoError(t, <-inflight, "the call in flight completes")
	select {
	case <-h.stopped:
		require.NoError(t, h.serveErr)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop")
	}
}

func TestMetricsExposeBuildInfoAndCalls(t *testing.T) {
	h := start(t, 0)
	require.NoError(t, h.call(t, 0))
	families, err := h.srv.registry.Gather()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	require.True(t, seen["bmcis_build_info"])
	require.True(t, seen["bmcis_grpc_server_handled_total"])
	require.True(t, seen["bmcis_grpc_server_handling_seconds"])
}

// A call the server answers UNAVAILABLE is retried by every client dialed
// with platform/grpcclient, up to 3 attempts in all (docs/MCP.md): the
// caller sees the third attempt's answer, and the server saw three calls.
func TestClientsRetryUnavailable(t *testing.T) {
	h := start(t, 0)
	require.NoError(t, h.call(t, 7), "two UNAVAILABLE answers, then OK: the caller sees OK")
	require.Equal(t, int32(3), h.svc.flaky.Load(), "three attempts reached the server")

	h.svc.flaky.Store(-1) // three UNAVAILABLE answers in a row: all attempts spent
	err := h.call(t, 7)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, int32(2), h.svc.flaky.Load(), "no fourth attempt")

	// An UNAVAILABLE that already made the caller wait is not retried: a
	// hung dependency answers in one timeout, not three.
	h.svc.flaky.Store(0)
	err = h.call(t, 8)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Equal(t, int32(1), h.svc.flaky.Load(), "one attempt")
}

type switchablePinger struct{ down atomic.Bool }

func (p *switchablePinger) Ping(context.Context) error {
	if p.down.Load() {
		return errors.New("dial tcp 127.0.0.1:5432: connection refused")
	}
	return nil
}

// TestDatabaseHealthIsItsOwnService: a database outage turns the
// DatabaseHealthService name NOT_SERVING, while the overall status (what
// liveness and readiness probes ask) stays SERVING; it comes back by itself.
func TestDatabaseHealthIsItsOwnService(t *testing.T) {
	h := start(t, 0)
	db := &switchablePinger{}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { defer close(watched); h.srv.WatchDatabase(ctx, db) }()
	t.Cleanup(func() { cancel(); <-watched })
	health := healthpb.NewHealthClient(h.conn)
	statusOf := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	// The waits only guard against never (a loaded machine may take
	// seconds): how soon follows dbhealth's interval and hysteresis.
	require.Eventually(t, func() bool { return statusOf(DatabaseHealthService) == healthpb.HealthCheckResponse_SERVING }, 20*time.Second, 10*time.Millisecond)

	db.down.Store(true)
	require.Eventually(t, func() bool { return statusOf(DatabaseHealthService) == healthpb.HealthCheckResponse_NOT_SERVING }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, statusOf(""), "liveness must not depend on the database")
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, statusOf("grpc.testing.TestService"))
	require.Contains(t, h.logs.String(), "database unreachable")

	// It comes back by itself (platform/dbhealth says how soon).
	db.down.Store(false)
	require.Eventually(t, func() bool { return statusOf(DatabaseHealthService) == healthpb.HealthCheckResponse_SERVING }, 20*time.Second, 10*time.Millisecond)
}
