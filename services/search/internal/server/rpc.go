package server

import (
	"time"

	"context"
	"errors"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/platform/readmask"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// chunksResponseDesc is what a GetChunks read mask names fields of.
var chunksResponseDesc = (&searchv1.GetChunksResponse{}).ProtoReflect().Descriptor()

// GetChunks returns whole chunks by id, in the order asked. They come from
// memory; ids this replica has not loaded yet are read from PostgreSQL.
func (s *Server) GetChunks(ctx context.Context, req *searchv1.GetChunksRequest) (*searchv1.GetChunksResponse, error) {
	s.labelAnswer(ctx)
	ids := req.GetChunkIds()
	if !limits.ChunkIDs.Allows(len(ids)) {
		return nil, grpcserver.InvalidArgument("chunk_ids", "give between %d and %d ids, got %d", limits.ChunkIDs.Min, limits.ChunkIDs.Max, len(ids))
	}
	for _, id := range ids {
		if id <= 0 {
			// No chunk has one: reporting it missing would hide the mistake.
			return nil, grpcserver.InvalidArgument("chunk_ids", "must hold positive ids (chunk_id values of search results), got %d", id)
		}
	}
	mask, err := readmask.New(req.GetReadMask(), chunksResponseDesc, "chunks.chunk_id", "missing_ids")
	if err != nil {
		return nil, grpcserver.InvalidArgument("read_mask", "%v", err)
	}
	set, err := callerAccess(ctx, req.GetScope().GetAccess())
	if err != nil {
		return nil, err
	}
	recs := s.ix.Chunks(ids)
	var unknown []int64
	for i, r := range recs {
		if r == nil {
			unknown = append(unknown, ids[i])
		}
	}
	fromDB := map[int64]*index.Chunk{}
	if len(unknown) > 0 {
		dctx, cancel := s.dbCtx(ctx)
		chunks, docs, err := s.st.ChunksByID(dctx, unknown)
		cancel()
		if err != nil {
			return nil, dbError(ctx, err)
		}
		_, recs := index.Records(docs, chunks)
		for _, r := range recs {
			fromDB[r.ChunkID] = r
		}
	}
	var texts map[int64]store.StoredText
	if mask.Wants("chunks.chunk_text") || mask.Wants("chunks.context_header") {
		dctx, cancel := s.dbCtx(ctx)
		texts, _, err = s.texts.texts(dctx, recs)
		cancel()
		if err != nil {
			return nil, dbError(ctx, err)
		}
	}
	sc := s.readScope(req.GetScope())
	resp := &searchv1.GetChunksResponse{}
	for i, id := range ids {
		r := recs[i]
		if r == nil {
			r = fromDB[id]
		}
		if r == nil || !sc.allows(r.Doc.Category) || !access.Allows(set, r.Doc.Access) { // out of scope: as if it did not exist
			resp.MissingIds = append(resp.MissingIds, id)
			continue
		}
		resp.Chunks = append(resp.Chunks, chunkProto(r, texts))
	}
	mask.Prune(resp)
	return resp, nil
}

// ListCategories lists the categories this replica can filter on.
func (s *Server) ListCategories(ctx context.Context, req *searchv1.ListCategoriesRequest) (*searchv1.ListCategoriesResponse, error) {
	sc := s.readScope(req.GetScope())
	set, err := callerAccess(ctx, req.GetScope().GetAccess())
	if err != nil {
		return nil, err
	}
	cats := s.ix.Categories(set)
	resp := &searchv1.ListCategoriesResponse{Categories: make([]*searchv1.Category, 0, len(cats))}
	for name, n := range cats {
		if !sc.allows(name) {
			continue
		}
		resp.Categories = append(resp.Categories, &searchv1.Category{Name: name, DocumentCount: int32(n)})
	}
	sort.Slice(resp.Categories, func(i, j int) bool { return resp.Categories[i].Name < resp.Categories[j].Name })
	return resp, nil
}

// GetIndexStatus describes this replica's index and the live model.
func (s *Server) GetIndexStatus(ctx context.Context, req *searchv1.GetIndexStatusRequest) (*searchv1.GetIndexStatusResponse, error) {
	st := s.ix.Stats()
	sc := s.readScope(req.GetScope())
	set, err := callerAccess(ctx, req.GetScope().GetAccess())
	if err != nil {
		return nil, err
	}
	// An access set limits the counts like a category scope does, once
	// some document has an access list.
	restricted := set != nil && s.ix.HasRestricted()
	if sc.limited || restricted {
		var cats map[string]bool
		if sc.limited {
			cats = sc.allowed
		}
		st.Documents, st.Chunks = s.ix.CountIn(cats, set)
	}
	provider, model, dims := s.emb.Describe()
	resp := &searchv1.GetIndexStatusResponse{
		Documents: int64(st.Documents), Chunks: int64(st.Chunks),
		EmbedderProvider: provider, EmbedderDimensions: int32(dims),
	}
	if !sc.limited && !restricted {
		// Each of these speaks of the whole corpus, which a scoped key may
		// not count, or moves when any document is written (the change
		// counter and time; the model's identity, age and coverage and a
		// due retrain, as a retrain follows any ingest): shown to a limited
		// caller, they would tell it when one it may not read was.
		f := s.sweeps.Freshness()
		resp.EmbedderModel = model
		if !f.TrainedAt.IsZero() {
			resp.ModelTrainedAt = timestamppb.New(f.TrainedAt)
		}
		resp.ModelTermCoverage = f.Coverage
		resp.RetrainPending = f.Pending || f.Running
		resp.ModelTrainedChunks = int64(f.TrainedOn)
		resp.RetrainReason = f.Reason
		resp.IndexGeneration = st.Generation
		if !st.LastChange.IsZero() && st.LastChange.Unix() > 0 {
			resp.LastChangeAt = timestamppb.New(st.LastChange)
		}
	}
	return resp, nil
}

// DeleteDocument removes a document; this replica's index reflects it
// before the call returns, the others within a poll.
func (s *Server) DeleteDocument(ctx context.Context, req *searchv1.DeleteDocumentRequest) (*searchv1.DeleteDocumentResponse, error) {
	id := strings.TrimSpace(req.GetExternalId())
	if id == "" {
		return nil, grpcserver.InvalidArgument("external_id", "must not be empty")
	}
	dctx, cancel := s.dbCtx(ctx)
	res, err := s.st.DeleteDocument(dctx, id)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "no document with external_id %q", id)
	}
	if err != nil {
		return nil, dbError(ctx, err)
	}
	dctx, cancel = s.dbCtx(ctx)
	err = s.feed.WaitApplied(dctx, res.Generation)
	cancel()
	if err != nil {
		return nil, dbError(ctx, err)
	}
	return &searchv1.DeleteDocumentResponse{ChunksDeleted: int32(res.Chunks)}, nil
}

// ListSources lists the named sources with their counts and last sync. A
// scoped key sees only the sources holding documents of its categories,
// counts only those documents, and not the last sync's counts (they cover
// the whole source). Roots are paths on the machines that synced them: only
// an operator's credential (the ingest role) sees them.
func (s *Server) ListSources(ctx context.Context, req *searchv1.ListSourcesRequest) (*searchv1.ListSourcesResponse, error) {
	sc := s.readScope(req.GetScope())
	var cats []string
	if sc.limited {
		cats = sc.categories()
	}
	set, err := callerAccess(ctx, req.GetScope().GetAccess())
	if err != nil {
		return nil, err
	}
	if !s.ix.HasRestricted() {
		set = nil // nothing to hide: the list stays the unrestricted one
	}
	limited := sc.limited || set != nil
	operator := rpcauth.Holds(ctx, rpcauth.Ingest)
	dctx, cancel := s.dbCtx(ctx)
	srcs, err := s.st.Sources(dctx, cats, set)
	cancel()
	if err != nil {
		return nil, dbError(ctx, err)
	}
	resp := &searchv1.ListSourcesResponse{Sources: make([]*searchv1.Source, 0, len(srcs))}
	for _, src := range srcs {
		p := &searchv1.Source{Name: src.Name, DocumentCount: int32(src.Documents), ChunkCount: int32(src.Chunks)}
		p.Kind = src.Kind
		if operator {
			// Settings hold URLs and secret references (never secrets), and
			// errors name URLs: an operator's, like roots.
			p.Root, p.Settings, p.LastError = src.Root, src.Settings, src.LastError
			p.DefaultAccess = src.DefaultAccess
		}
		if !limited {
			p.LastWritten, p.LastUnchanged = int32(src.LastSync.Written), int32(src.LastSync.Unchanged)
			p.LastFailed, p.LastDeleted = int32(src.LastSync.Failed), int32(src.LastSync.Deleted)
			p.EverySeconds, p.LastStatus = int64(src.Every/time.Second), src.LastStatus
			p.ConsecutiveFailures, p.Running = int32(src.Failures), src.Running
			if !src.NextRunAt.IsZero() {
				p.NextRunAt = timestamppb.New(src.NextRunAt)
			}
			if !src.LastRunAt.IsZero() {
				p.LastRunAt = timestamppb.New(src.LastRunAt)
			}
		}
		if !src.LastSyncAt.IsZero() {
			p.LastSyncAt = timestamppb.New(src.LastSyncAt)
		}
		resp.Sources = append(resp.Sources, p)
	}
	return resp, nil
}
