// Package grpcclient dials BMCIS services the one way every caller should:
// the caller's own service credential on every call (platform/rpcauth says
// what each role may do), and the request id and trace context passed along.
package grpcclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/tlsconfig"
	"github.com/bmcis/knowledge/platform/tracing"
)

// Header names shared with grpcserver (kept here too so light binaries need
// not import the server package).
const (
	ServiceTokenHeader = "x-bmcis-service-token"
	RequestIDHeader    = "x-request-id"
)

// serviceToken attaches the caller's credential to every call: the
// connection's own, or the one WithCredential put in the call's context.
type serviceToken string

func (t serviceToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if c, ok := ctx.Value(credentialKey{}).(string); ok {
		return map[string]string{ServiceTokenHeader: c}, nil
	}
	if t == "" {
		return nil, nil
	}
	return map[string]string{ServiceTokenHeader: string(t)}, nil
}

type credentialKey struct{}

// WithCredential makes the calls made with ctx carry credential instead of
// the connection's own: the gateway forwards an operator's admin or ingest
// credential this way, holding none itself.
func WithCredential(ctx context.Context, credential string) context.Context {
	return context.WithValue(ctx, credentialKey{}, credential)
}

// RequireTransportSecurity is false: without TLS settings, service-to-service
// traffic is plaintext inside the cluster network, fenced by NetworkPolicies.
func (serviceToken) RequireTransportSecurity() bool { return false }

// propagateRequestID forwards the caller's request id, so one id follows a
// call through the adapter or gateway into every service it touches.
func propagateRequestID(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if id := logging.RequestID(ctx); id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, id)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func propagateRequestIDStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if id := logging.RequestID(ctx); id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, id)
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// retryPolicy retries UNAVAILABLE with exponential backoff. gRPC applies it
// only where the caller has not started receiving a reply, so it is safe for
// the read-only calls it is meant for; writers should not rely on it.
const retryPolicy = `{
  "methodConfig": [{
    "name": [{}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.05s",
      "maxBackoff": "0.5s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// reconnect bounds the wait between connection attempts to a backend that
// went away. gRPC's default backoff grows to 120 s, so a caller came back
// tens of seconds after a long outage ended; capped at one second, calls
// succeed within about a second of the backend's return, at the cost of one
// connection attempt a second per client while it is down.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 2 * time.Second,
}

// ErrBadAddress is an address Dial refuses before dialing: empty, or a URL
// where HOST:PORT belongs. Retrying cannot help, so callers report it as
// the caller's mistake, not as an unavailable service.
var ErrBadAddress = errors.New("bad service address")

// grpc-go's error when the first bytes a server sent are not an HTTP/2
// frame header: "HTTP/1.1 400 ..." read as one has a length far over the
// limit (x/net/http2 adds "the frame header looked like an HTTP/1.1 header"
// when it recognises one; not for HTTP/1.0). An HTTP/2 server never answers
// that way, so it is an HTTP/1.x server (or another protocol).
const (
	prefaceError  = "error reading server preface:"
	frameTooLarge = "frame too large"
)

// NotGRPC reports whether err is a call's failure because the address
// answered, but not in gRPC: an HTTP/1.x port (a REST, health or metrics
// one) given where a service's gRPC HOST:PORT belongs. Retrying cannot
// help; callers report it as the caller's mistake, like ErrBadAddress.
func NotGRPC(err error) bool {
	st, ok := status.FromError(err)
	return err != nil && ok && strings.Contains(st.Message(), prefaceError) && strings.Contains(st.Message(), frameTooLarge)
}

// checkAddress refuses what gRPC would otherwise take as a host name and
// retry against until the deadline: nothing, or an http(s) URL.
func checkAddress(addr string) error {
	switch lower := strings.ToLower(strings.TrimSpace(addr)); {
	case lower == "":
		return fmt.Errorf("%w: empty; give HOST:PORT", ErrBadAddress)
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return fmt.Errorf("%w: %q is a URL; give the service's gRPC HOST:PORT (e.g. 127.0.0.1:50051)", ErrBadAddress, addr)
	}
	return nil
}

// Dial returns a client connection to addr ("host:port"). The connection is
// lazy: it connects on first use and reconnects by itself. TLS follows
// platform/tlsconfig's variables (plaintext when none is set).
func Dial(addr, token string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := checkAddress(addr); err != nil {
		return nil, err
	}
	tlsCfg, err := tlsconfig.ClientFromEnv()
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	transport := insecure.NewCredentials()
	if tlsCfg != nil {
		transport = credentials.NewTLS(tlsCfg)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithConnectParams(reconnect),
		// A client span per call; its trace context goes along as
		// traceparent metadata (platform/tracing).
		grpc.WithStatsHandler(tracing.ClientHandler()),
		grpc.WithChainUnaryInterceptor(propagateRequestID),
		grpc.WithChainStreamInterceptor(propagateRequestIDStream),
		grpc.WithDefaultServiceConfig(retryPolicy),
	}
	opts = append(opts, grpc.WithPerRPCCredentials(serviceToken(token)))
	conn, err := grpc.NewClient(addr, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}
