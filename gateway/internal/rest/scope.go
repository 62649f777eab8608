package rest

import (
	"context"

	"google.golang.org/grpc"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/readscope"
)

// ScopeTool is the tool a route stands for in a key's tool scope: its own
// MCP tool, else its service's (categories and index status are search
// reads, suggestions and graph status vendor-graph reads). Admin routes and
// the dashboard's own routes stand for none, so a tool-scoped key is
// refused there.
func (r Route) ScopeTool() string {
	switch {
	case r.Access != APIKey:
		return ""
	case r.Tool != "":
		return r.Tool
	case r.Service == backends.Search:
		return "semantic_search"
	case r.Service == backends.VendorGraph:
		return "find_vendor_info"
	}
	return ""
}

// readScope is the search scope of the caller's key and the caller's
// access set (platform/readscope).
func readScope(ctx context.Context) *searchv1.ReadScope {
	cats, set := readscope.Categories(ctx), readscope.Access(ctx)
	if cats == nil && set == nil {
		return nil
	}
	return &searchv1.ReadScope{Categories: cats, Access: set}
}

// scopedSearch sets the scope of every search read from the caller's key,
// replacing any value the REST caller sent in the body or query string:
// the scope is the key's, never the caller's to choose. Searches and vendor
// lookups also name the caller whose cached replies they may use
// (platform/cacheowner).
type scopedSearch struct {
	searchv1.SearchServiceClient
}

func (c scopedSearch) Search(ctx context.Context, in *searchv1.SearchRequest, opts ...grpc.CallOption) (*searchv1.SearchResponse, error) {
	in.Scope = readScope(ctx)
	noteQuery(ctx, in.GetQuery())
	added := withDocumentRead(in.GetReadMask(), "results.chunk.document_id")
	resp, err := c.SearchServiceClient.Search(cacheowner.Outgoing(ctx), in, opts...)
	ids := make([]int64, 0, len(resp.GetResults()))
	var docs []string
	for _, r := range resp.GetResults() {
		ids = append(ids, r.GetChunk().GetChunkId())
		docs = addDocument(docs, r.GetChunk().GetDocumentId())
		if added && r.GetChunk() != nil {
			r.Chunk.DocumentId = ""
		}
	}
	noteChunks(ctx, ids, docs)
	return resp, err
}

func (c scopedSearch) GetChunks(ctx context.Context, in *searchv1.GetChunksRequest, opts ...grpc.CallOption) (*searchv1.GetChunksResponse, error) {
	in.Scope = readScope(ctx)
	noteTarget(ctx, auditlog.ChunkTarget(in.GetChunkIds()))
	added := withDocumentRead(in.GetReadMask(), "chunks.document_id")
	resp, err := c.SearchServiceClient.GetChunks(ctx, in, opts...)
	ids := make([]int64, 0, len(resp.GetChunks()))
	var docs []string
	for _, ch := range resp.GetChunks() {
		ids = append(ids, ch.GetChunkId())
		docs = addDocument(docs, ch.GetDocumentId())
		if added {
			ch.DocumentId = ""
		}
	}
	noteChunks(ctx, ids, docs)
	return resp, err
}

func (c scopedSearch) ListCategories(ctx context.Context, in *searchv1.ListCategoriesRequest, opts ...grpc.CallOption) (*searchv1.ListCategoriesResponse, error) {
	in.Scope = readScope(ctx)
	return c.SearchServiceClient.ListCategories(ctx, in, opts...)
}

func (c scopedSearch) GetIndexStatus(ctx context.Context, in *searchv1.GetIndexStatusRequest, opts ...grpc.CallOption) (*searchv1.GetIndexStatusResponse, error) {
	in.Scope = readScope(ctx)
	return c.SearchServiceClient.GetIndexStatus(ctx, in, opts...)
}

func (c scopedSearch) ListSources(ctx context.Context, in *searchv1.ListSourcesRequest, opts ...grpc.CallOption) (*searchv1.ListSourcesResponse, error) {
	in.Scope = readScope(ctx)
	return c.SearchServiceClient.ListSources(ctx, in, opts...)
}

// scopedVendor sets the evidence scope of every vendor lookup from the
// caller's key, replacing any value the REST caller sent: a vendor's
// evidence quotes documents, which must stay inside the key's categories.
type scopedVendor struct {
	vendorgraphv1.VendorGraphServiceClient
}

func (c scopedVendor) GetVendor(ctx context.Context, in *vendorgraphv1.GetVendorRequest, opts ...grpc.CallOption) (*vendorgraphv1.GetVendorResponse, error) {
	in.EvidenceCategories = readscope.Categories(ctx)
	in.EvidenceAccess = readscope.Access(ctx)
	noteQuery(ctx, in.GetName())
	resp, err := c.VendorGraphServiceClient.GetVendor(cacheowner.Outgoing(ctx), in, opts...)
	ids := make([]int64, 0, len(resp.GetEvidence()))
	var docs []string
	for _, ev := range resp.GetEvidence() {
		ids = append(ids, ev.GetChunkId())
		docs = addDocument(docs, ev.GetDocumentId())
	}
	noteChunks(ctx, ids, docs)
	return resp, err
}

// SuggestVendors records the text typed as the read's query, as a vendor
// lookup records the name asked for.
func (c scopedVendor) SuggestVendors(ctx context.Context, in *vendorgraphv1.SuggestVendorsRequest, opts ...grpc.CallOption) (*vendorgraphv1.SuggestVendorsResponse, error) {
	noteQuery(ctx, in.GetText())
	return c.VendorGraphServiceClient.SuggestVendors(ctx, in, opts...)
}
