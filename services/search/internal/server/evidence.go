package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// GetEntityEvidence answers what the documents say about an entity:
// vendorgraph's GetVendor evidence, from search's own mentions.
func (s *Server) GetEntityEvidence(ctx context.Context, req *searchv1.GetEntityEvidenceRequest) (*searchv1.GetEntityEvidenceResponse, error) {
	if !uuidPattern.MatchString(req.GetEntityId()) {
		return nil, status.Errorf(codes.InvalidArgument, "entity_id %q is not a UUID", req.GetEntityId())
	}
	if !limits.EntityEvidence.Allows(int(req.GetLimit())) {
		return nil, status.Errorf(codes.InvalidArgument, "limit must be %d to %d, got %d",
			limits.EntityEvidence.Min, limits.EntityEvidence.Max, req.GetLimit())
	}
	set, err := callerAccess(ctx, req.GetAccess())
	if err != nil {
		return nil, err
	}
	ev, err := s.st.Evidence(ctx, req.GetEntityId(), int(req.GetLimit()), req.GetCategories(), set)
	if err != nil {
		return nil, dbError(ctx, err)
	}
	resp := &searchv1.GetEntityEvidenceResponse{
		ChunkCount: int32(ev.ChunkCount),
		Chunks:     make([]*searchv1.EntityEvidenceChunk, len(ev.Chunks)),
		Documents:  make([]*searchv1.EntityEvidenceDocument, len(ev.Documents)),
	}
	for i, c := range ev.Chunks {
		resp.Chunks[i] = &searchv1.EntityEvidenceChunk{ChunkId: c.ChunkID, DocumentId: c.DocumentID, SourceFile: c.SourceFile,
			MentionCount: int32(c.MentionCount), Snippet: c.Snippet, Score: c.Score}
	}
	for i, d := range ev.Documents {
		resp.Documents[i] = &searchv1.EntityEvidenceDocument{DocumentId: d.DocumentID, SourceFile: d.SourceFile,
			Title: d.Title, MentionCount: int32(d.MentionCount), ChunkCount: int32(d.ChunkCount)}
	}
	return resp, nil
}
