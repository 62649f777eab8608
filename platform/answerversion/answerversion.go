// Package answerversion carries, from search to the MCP adapter, the index
// version a Search or GetChunks answer was computed at: a gRPC response
// header holding the IndexVersion message WatchIndex streams. The adapter
// keeps an answer only when it equals the version its WatchIndex stream
// reports, since after a connection's GOAWAY the calls and the stream may
// reach different replicas (docs/MCP.md, "The answer cache").
package answerversion

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// Header is the response header's key; binary, so gRPC carries it base64
// (the "-bin" suffix).
const Header = "bmcis-index-version-bin"

// Send sets the header of the call in ctx to v. Only search's handlers call
// it, for the adapter role alone: no other caller learns the change counter.
func Send(ctx context.Context, v *searchv1.IndexVersion) error {
	b, err := proto.Marshal(v)
	if err != nil {
		return err
	}
	return grpc.SetHeader(ctx, metadata.Pairs(Header, string(b)))
}

// From returns the version the response header md carries, if it carries
// exactly one that decodes.
func From(md metadata.MD) (*searchv1.IndexVersion, bool) {
	vals := md.Get(Header)
	if len(vals) != 1 {
		return nil, false
	}
	v := &searchv1.IndexVersion{}
	if err := proto.Unmarshal([]byte(vals[0]), v); err != nil {
		return nil, false
	}
	return v, true
}
