package server

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/ingest"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

type ingestResult struct {
	failure *ingest.Failure
	write   store.WriteResult
	chunks  int
	err     error
}

// IngestDocuments writes each document of the stream in its own
// transaction (IngestWorkers at a time; documents with the same id keep
// their order), then, before answering: brings this replica's index up to
// date, and runs the embedding sweep (training the builtin model first if
// none is active). A bad document is reported in failures; a database
// failure ends the stream with its status (documents already written stay).
func (s *Server) IngestDocuments(stream grpc.ClientStreamingServer[searchv1.IngestDocumentsRequest, searchv1.IngestDocumentsResponse]) error {
	start := time.Now()
	streamDone := s.sweeps.StreamStarted()
	defer func() {
		streamDone()
		// The corpus may have outgrown the builtin model: check now.
		s.sweeps.Kick()
	}()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	workers := max(1, s.cfg.IngestWorkers)
	jobs := make([]chan *searchv1.Document, workers)
	results := make(chan ingestResult, 64)
	var wg sync.WaitGroup
	lim := ingest.Limits{MaxBytes: s.cfg.MaxDocumentBytes}
	for i := range jobs {
		jobs[i] = make(chan *searchv1.Document, 8)
		wg.Add(1)
		go func(in <-chan *searchv1.Document) {
			defer wg.Done()
			for d := range in {
				row, fail := ingest.Prepare(s.ck, d, lim)
				if fail != nil {
					results <- ingestResult{failure: fail}
					continue
				}
				if ctx.Err() != nil {
					results <- ingestResult{err: ctx.Err()}
					continue
				}
				wctx, wcancel := context.WithTimeout(ctx, s.cfg.IngestTimeout)
				res, err := s.st.WriteDocument(wctx, *row)
				err = dbError(ctx, err)
				wcancel()
				results <- ingestResult{write: res, chunks: len(row.Chunks), err: err}
			}
		}(jobs[i])
	}
	go func() { wg.Wait(); close(results) }()

	resp := &searchv1.IngestDocumentsResponse{}
	var maxGen int64
	var firstErr error
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for r := range results {
			switch {
			case r.err != nil:
				if firstErr == nil {
					firstErr = r.err
					cancel()
				}
			case r.failure != nil:
				resp.DocumentsFailed++
				resp.Failures = append(resp.Failures, &searchv1.IngestFailure{
					ExternalId: r.failure.ExternalID, SourceFile: r.failure.SourceFile, Reason: r.failure.Reason})
				s.m.ingestDocs.WithLabelValues("failed").Inc()
			case r.write.Written:
				resp.DocumentsWritten++
				resp.ChunksWritten += int32(r.chunks)
				maxGen = max(maxGen, r.write.Generation)
				s.m.ingestDocs.WithLabelValues("written").Inc()
				s.m.ingestChunks.Add(float64(r.chunks))
			default:
				resp.DocumentsUnchanged++
				s.m.ingestDocs.WithLabelValues("unchanged").Inc()
			}
		}
	}()

	var recvErr error
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			recvErr = err
			break
		}
		resp.DocumentsReceived++
		d := req.GetDocument()
		if d == nil {
			d = &searchv1.Document{}
		}
		h := fnv.New32a()
		key := strings.TrimSpace(d.GetExternalId())
		if key == "" {
			key = strings.TrimSpace(d.GetSourceFile())
		}
		_, _ = h.Write([]byte(key))
		select {
		case jobs[h.Sum32()%uint32(workers)] <- d:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, j := range jobs {
		close(j)
	}
	<-collected
	if recvErr != nil {
		return recvErr
	}
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) && stream.Context().Err() != nil {
			return stream.Context().Err()
		}
		return firstErr
	}
	sctx := stream.Context()
	if maxGen > 0 {
		if err := s.feed.WaitApplied(sctx, maxGen); err != nil {
			return dbError(sctx, err)
		}
	}
	// Embed what was written (and train first when no model is active and
	// no other stream of this replica is still running).
	if resp.DocumentsWritten > 0 || s.emb.Current() == nil {
		_, err := s.sweeps.Sweep(sctx, embedding.SweepOptions{Wait: true, Train: s.sweeps.OnlyStream(), Bulk: true})
		if err != nil {
			if sctx.Err() != nil {
				return sctx.Err()
			}
			return status.Errorf(codes.Unavailable, "documents were stored but embedding them failed (%v); they are searchable by keyword and will be embedded by the next sweep or re-ingestion", err)
		}
	}
	resp.Seconds = time.Since(start).Seconds()
	return stream.SendAndClose(resp)
}
