package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
)

// Reindex re-embeds every chunk with a model made from this replica's
// embedder settings and activates it. It waits for the embedding lock, so a
// sweep in progress (here or on another replica) finishes first; the
// caller's cancellation leaves the previous model active, since vectors and
// model switch in one transaction.
func (s *Server) Reindex(ctx context.Context, _ *searchv1.ReindexRequest) (*searchv1.ReindexResponse, error) {
	rep, err := s.sweeps.Sweep(ctx, embedding.SweepOptions{Wait: true, Reindex: true, Bulk: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		// The Scheduler logged the cause, which can name a provider's
		// address or settings; the caller learns what it can act on.
		return nil, status.Error(codes.Unavailable, "reindexing failed; the previous model stays active (the search service's log says why)")
	}
	if rep.Model == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "no model could be trained: %s", rep.NotTrainedOn)
	}
	cfg := s.cfg.Embedding
	return &searchv1.ReindexResponse{
		Model:              rep.Model,
		EmbedderProvider:   cfg.Provider,
		EmbedderDimensions: int32(cfg.Dims),
		ColumnResized:      rep.Resized,
		Trained:            rep.Trained,
		TrainedChunks:      int64(rep.TrainedOn),
		EmbeddedChunks:     rep.Embedded,
		TotalChunks:        rep.TotalChunks,
		IndexRebuilt:       rep.Rebuilt,
		TrainSeconds:       rep.TrainTime.Seconds(),
		EmbedSeconds:       rep.EmbedTime.Seconds(),
		WriteSeconds:       rep.WriteTime.Seconds(),
		IndexSeconds:       rep.IndexTime.Seconds(),
	}, nil
}
