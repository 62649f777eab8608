package rest

import (
	"context"

	"google.golang.org/grpc"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// DefaultSearchLimit is the page size of POST /v1/search when the body
// names none. proto3 cannot tell an omitted limit from 0, and the search
// service refuses 0, so REST fills the documented default in.
const DefaultSearchLimit = limits.DefaultPageSize

// searchDefaults fills REST's documented defaults into search requests
// before they reach the service.
type searchDefaults struct {
	searchv1.SearchServiceClient
}

func (c searchDefaults) Search(ctx context.Context, in *searchv1.SearchRequest, opts ...grpc.CallOption) (*searchv1.SearchResponse, error) {
	if in.GetLimit() == 0 {
		in.Limit = DefaultSearchLimit
	}
	return c.SearchServiceClient.Search(ctx, in, opts...)
}
