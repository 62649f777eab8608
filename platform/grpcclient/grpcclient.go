// Package grpcclient dials BMCIS services the one way every caller should:
// plaintext inside the cluster, the internal service token on every call, and
// the request id passed along.
package grpcclient

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/bmcis/knowledge/platform/logging"
)

// Header names shared with grpcserver (kept here too so light binaries need
// not import the server package).
const (
	ServiceTokenHeader = "x-bmcis-service-token"
	RequestIDHeader    = "x-request-id"
	AdminTokenHeader   = "x-bmcis-admin-token"
)

// serviceToken attaches the internal token to every call.
type serviceToken string

func (t serviceToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{ServiceTokenHeader: string(t)}, nil
}

// RequireTransportSecurity is false: service-to-service traffic is plaintext
// inside the cluster network, fenced by NetworkPolicies.
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

// Dial returns a client connection to addr ("host:port"). The connection is
// lazy: it connects on first use and reconnects by itself.
func Dial(addr, token string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(propagateRequestID),
		grpc.WithChainStreamInterceptor(propagateRequestIDStream),
		grpc.WithDefaultServiceConfig(retryPolicy),
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(serviceToken(token)))
	}
	conn, err := grpc.NewClient(addr, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// WithAdminToken adds the admin token to an outgoing context.
func WithAdminToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, AdminTokenHeader, token)
}
