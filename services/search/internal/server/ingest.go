package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

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
	resp, err := s.ingestStream(stream.Context(), stream.Recv, nil, false)
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}

// ackInterval is how often IngestDocumentsAcked reports progress (when
// anything changed): often enough that a lost connection leaves little
// unacknowledged, rarely enough to cost nothing.
const ackInterval = 100 * time.Millisecond

// IngestDocumentsAcked is IngestDocuments that acknowledges committed
// documents while the stream runs (cumulative counts, every ackInterval),
// then sends the summary. A client that loses the connection knows that at
// least the last acknowledged documents are stored.
func (s *Server) IngestDocumentsAcked(stream grpc.BidiStreamingServer[searchv1.IngestDocumentsRequest, searchv1.IngestDocumentsProgress]) error {
	var mu sync.Mutex
	var counts, sent searchv1.IngestDocumentsProgress
	ack := func(written, unchanged, failed int32) {
		mu.Lock()
		counts.DocumentsWritten, counts.DocumentsUnchanged, counts.DocumentsFailed = written, unchanged, failed
		mu.Unlock()
	}
	// One goroutine sends acknowledgements (gRPC allows one sender beside
	// the receiver); it stops before the summary is sent.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(ackInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			p := &searchv1.IngestDocumentsProgress{DocumentsWritten: counts.DocumentsWritten,
				DocumentsUnchanged: counts.DocumentsUnchanged, DocumentsFailed: counts.DocumentsFailed}
			mu.Unlock()
			if p.DocumentsWritten == sent.DocumentsWritten && p.DocumentsUnchanged == sent.DocumentsUnchanged &&
				p.DocumentsFailed == sent.DocumentsFailed {
				continue
			}
			if stream.Send(p) != nil {
				return // the stream is gone; ingestStream sees it too
			}
			sent.DocumentsWritten, sent.DocumentsUnchanged, sent.DocumentsFailed = p.DocumentsWritten, p.DocumentsUnchanged, p.DocumentsFailed
		}
	}()
	resp, err := s.ingestStream(stream.Context(), stream.Recv, ack, false)
	close(stop)
	<-stopped
	if err != nil {
		return err
	}
	return stream.Send(&searchv1.IngestDocumentsProgress{DocumentsWritten: resp.DocumentsWritten,
		DocumentsUnchanged: resp.DocumentsUnchanged, DocumentsFailed: resp.DocumentsFailed, Summary: resp})
}

// ingestStream is both ingestion RPCs and the runs of scheduled sources
// (scheduled: the sync header names a source the service syncs itself): it
// reads documents with recv until io.EOF, and calls ack (when not nil) with
// the cumulative counts after each document is committed, found unchanged
// or rejected.
func (s *Server) ingestStream(streamCtx context.Context, recv func() (*searchv1.IngestDocumentsRequest, error),
	ack func(written, unchanged, failed int32), scheduled bool) (*searchv1.IngestDocumentsResponse, error) {
	start := time.Now()
	streamDone := s.sweeps.StreamStarted()
	defer func() {
		streamDone()
		// The corpus may have outgrown the builtin model: check now.
		s.sweeps.Kick()
	}()
	ctx, cancel := context.WithCancel(streamCtx)
	defer cancel()

	workers := max(1, s.cfg.IngestWorkers)
	jobs := make([]chan ingestJob, workers)
	results := make(chan ingestResult, 64)
	var wg sync.WaitGroup
	lim := ingest.Limits{MaxBytes: s.cfg.MaxDocumentBytes}
	for i := range jobs {
		jobs[i] = make(chan ingestJob, 8)
		wg.Add(1)
		go func(in <-chan ingestJob) {
			defer wg.Done()
			for j := range in {
				results <- s.ingestOne(ctx, j, lim)
				j.release()
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
			case r.write.Written || r.write.AccessChanged:
				resp.DocumentsWritten++
				resp.ChunksWritten += int32(r.chunks)
				maxGen = max(maxGen, r.write.Generation)
				s.m.ingestDocs.WithLabelValues("written").Inc()
				s.m.ingestChunks.Add(float64(r.chunks))
			default:
				resp.DocumentsUnchanged++
				s.m.ingestDocs.WithLabelValues("unchanged").Inc()
			}
			if ack != nil && r.err == nil {
				ack(resp.DocumentsWritten, resp.DocumentsUnchanged, resp.DocumentsFailed)
			}
		}
	}()

	rx := &receiver{s: s, ctx: ctx, recv: recv, resp: resp, results: results, jobs: jobs, scheduled: scheduled,
		budget: semaphore.NewWeighted(int64(max(lim.MaxBytes, 1<<20)))}
	synced := false
	defer func() {
		if rx.sync != nil {
			s.m.recordSync(synced, resp.DocumentsFailed)
		}
	}()
	recvErr := rx.run()
	for _, j := range jobs {
		close(j)
	}
	<-collected
	if recvErr != nil {
		return nil, recvErr
	}
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) && streamCtx.Err() != nil {
			return nil, streamCtx.Err()
		}
		return nil, firstErr
	}
	maxGen = max(maxGen, rx.accessGen)
	if rx.sync != nil {
		gen, err := s.finishSync(streamCtx, rx, resp)
		if err != nil {
			return nil, err
		}
		synced = true
		maxGen = max(maxGen, gen)
	}
	sctx := streamCtx
	if maxGen > 0 {
		if err := s.feed.WaitApplied(sctx, maxGen); err != nil {
			return nil, dbError(sctx, err)
		}
	}
	// Embed what was written (and train first when no model is active and
	// no other stream of this replica is still running).
	if resp.DocumentsWritten > 0 || s.emb.Current() == nil {
		_, err := s.sweeps.Sweep(sctx, embedding.SweepOptions{Wait: true, Train: s.sweeps.OnlyStream(), Bulk: true})
		if err != nil {
			if sctx.Err() != nil {
				return nil, sctx.Err()
			}
			// The cause can name models, settings or a provider's address:
			// the Scheduler logged it; the caller learns what it can rely on.
			return nil, status.Error(codes.Unavailable, "documents were stored but embedding or publishing them failed; they are searchable by keyword and will be embedded by the next sweep or re-ingestion")
		}
	}
	resp.Seconds = time.Since(start).Seconds()
	return resp, nil
}

// ingestOne prepares and writes one document. Preparation stops when ctx
// ends (the caller gone, or another document's database error): nothing
// of this stream would be written after that.
func (s *Server) ingestOne(ctx context.Context, j ingestJob, lim ingest.Limits) ingestResult {
	row, fail, err := ingest.Prepare(ctx, s.ck, j.doc, lim)
	if err != nil {
		return ingestResult{err: err}
	}
	if fail != nil {
		return ingestResult{failure: fail}
	}
	row.Source = j.source
	row.Access, row.AccessFromSource = j.access, j.fromSource
	if ctx.Err() != nil {
		return ingestResult{err: ctx.Err()}
	}
	wctx, wcancel := context.WithTimeout(ctx, s.cfg.IngestTimeout)
	defer wcancel()
	res, err := s.st.WriteDocument(wctx, *row)
	if errors.Is(err, store.ErrOtherSource) {
		return ingestResult{failure: &ingest.Failure{ExternalID: row.ExternalID, SourceFile: row.SourceFile, Reason: err.Error()}}
	}
	chunks := len(row.Chunks)
	if !res.Written {
		chunks = 0 // unchanged, or only its access list changed: no chunk written
	}
	return ingestResult{write: res, chunks: chunks, err: dbError(ctx, err)}
}

// finishSync ends a sync stream: a mirror deletes the source's documents
// that were neither sent nor kept, by id or under a folder the client could
// not list (through the one deletion path, Store.DeleteDocument), then the
// sync is recorded. It returns the highest generation it committed.
func (s *Server) finishSync(ctx context.Context, rx *receiver, resp *searchv1.IngestDocumentsResponse) (int64, error) {
	name := rx.sync.GetName()
	var maxGen int64
	if rx.sync.GetMirror() {
		keep := make([]string, 0, len(rx.seen))
		for id := range rx.seen {
			keep = append(keep, id)
		}
		dctx, cancel := context.WithTimeout(ctx, s.cfg.IngestTimeout)
		gone, err := s.st.SourceDocumentsExcept(dctx, name, keep)
		cancel()
		if err != nil {
			return 0, dbError(ctx, err)
		}
		for _, id := range gone {
			if rx.underKeptFolder(id) {
				rx.kept++ // unread, not gone: its stored version stays
				continue
			}
			dctx, cancel := s.dbCtx(ctx)
			res, err := s.st.DeleteDocument(dctx, id)
			cancel()
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return 0, dbError(ctx, err)
			}
			resp.DocumentsDeleted++
			maxGen = max(maxGen, res.Generation)
		}
	}
	dctx, cancel := s.dbCtx(ctx)
	err := s.st.FinishSync(dctx, name, store.SyncCounts{
		Written: int(resp.DocumentsWritten), Unchanged: int(resp.DocumentsUnchanged) + rx.kept,
		Failed: int(resp.DocumentsFailed), Deleted: int(resp.DocumentsDeleted)})
	cancel()
	if err != nil {
		return 0, dbError(ctx, err)
	}
	return maxGen, nil
}
