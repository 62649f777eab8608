package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/sourcename"
	"github.com/bmcis/knowledge/services/search/internal/sources"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Scheduled sources (docs/SOURCES.md): the service fetches git, web and
// server-folder sources itself. Any replica answers SyncSource; only
// replicas with the runner on (BMCIS_SEARCH_SOURCES_RUNNER) run the
// schedule. A run holds the source's lease row (store.Claim), so one run
// at a time per source across replicas; a run outliving its lease records
// nothing.

// The results of bmcis_search_source_runs_total.
const (
	runOK     = "ok"
	runFailed = "failed"
)

// minEvery and maxEvery bound a source's schedule.
const (
	minEvery   = time.Minute
	maxEvery   = 30 * 24 * time.Hour
	maxBackoff = 6 * time.Hour
	// A source's settings are a few short values (URLs, paths, references).
	maxSettings     = 16
	maxSettingBytes = 4096
)

// leaseOwner names this process in lease rows.
var leaseOwner = func() string {
	host, _ := os.Hostname()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}()

// AddSource records a source the service syncs.
func (s *Server) AddSource(ctx context.Context, req *searchv1.AddSourceRequest) (*searchv1.AddSourceResponse, error) {
	name := req.GetName()
	if err := checkSourceName(name); err != nil {
		return nil, err
	}
	kind, ok := sources.ByName(req.GetKind())
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "kind: %q is not a source kind (%v)", req.GetKind(), sources.Names())
	}
	every := time.Duration(req.GetEverySeconds()) * time.Second
	if every != 0 && (every < minEvery || every > maxEvery) {
		return nil, status.Errorf(codes.InvalidArgument, "every_seconds: want 0 (on demand) or %d..%d", int(minEvery.Seconds()), int(maxEvery.Seconds()))
	}
	if len(req.GetSettings()) > maxSettings {
		return nil, status.Errorf(codes.InvalidArgument, "settings: at most %d", maxSettings)
	}
	for k, v := range req.GetSettings() {
		if len(k) > 64 || len(v) > maxSettingBytes {
			return nil, status.Errorf(codes.InvalidArgument, "settings: %q: keys are at most 64 bytes, values %d", k, maxSettingBytes)
		}
	}
	in := maps.Clone(req.GetSettings())
	if in == nil {
		in = map[string]string{}
	}
	settings, err := kind.Check(in, s.cfg.Sources)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "settings: %v", err)
	}
	defaultAccess, err := access.ParseList(req.GetDefaultAccess().GetPrincipals())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "default_access: %v", err)
	}
	dctx, cancel := s.dbCtx(ctx)
	err = s.st.AddSource(dctx, store.NewSource{Name: name, Kind: kind.Name, Root: kind.Root(settings), Settings: settings, Every: every, DefaultAccess: defaultAccess})
	cancel()
	if errors.Is(err, store.ErrSourceExists) {
		return nil, status.Errorf(codes.AlreadyExists, "a source named %q exists (remove it first)", name)
	}
	if err != nil {
		return nil, dbError(ctx, err)
	}
	s.kickSources()
	src, err := s.sourceByName(ctx, name)
	if err != nil {
		return nil, err
	}
	return &searchv1.AddSourceResponse{Source: src}, nil
}

func (s *Server) sourceByName(ctx context.Context, name string) (*searchv1.Source, error) {
	resp, err := s.ListSources(ctx, &searchv1.ListSourcesRequest{})
	if err != nil {
		return nil, err
	}
	for _, src := range resp.GetSources() {
		if src.GetName() == name {
			return src, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no source named %q", name)
}

// checkSourceName refuses a malformed name before any lookup, the same
// way in every sources call.
func checkSourceName(name string) error {
	if !sourcename.Valid(name) {
		return status.Errorf(codes.InvalidArgument, "name: %q is not a source name (%s)", name, sourcename.Rule)
	}
	return nil
}

// SyncSource runs a source now and waits for the run.
func (s *Server) SyncSource(ctx context.Context, req *searchv1.SyncSourceRequest) (*searchv1.SyncSourceResponse, error) {
	name := req.GetName()
	if err := checkSourceName(name); err != nil {
		return nil, err
	}
	dctx, cancel := s.dbCtx(ctx)
	c, err := s.st.Claim(dctx, name, leaseOwner, s.cfg.SourceRunTimeout)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "no source named %q that the service syncs (folders on your machine: bmcisctl sync)", name)
	case errors.Is(err, store.ErrSourceBusy):
		return nil, status.Errorf(codes.Aborted, "source %q is being synced now; try again when that run ends", name)
	case err != nil:
		return nil, dbError(ctx, err)
	}
	resp, runErr := s.runSource(ctx, c)
	if runErr != nil {
		return nil, runStatus(runErr)
	}
	return resp, nil
}

// runStatus maps a failed run to the caller's status; the message is the
// run's own (kinds never put a secret in one). An unreachable source is
// FAILED_PRECONDITION, not UNAVAILABLE: the service is up, and clients
// retry UNAVAILABLE, which would run the failing source again.
func runStatus(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err
	}
	if errors.Is(err, errCallEnded) {
		code := codes.Canceled
		if errors.Is(err, context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return status.Error(code, errCallEnded.Error())
	}
	switch sources.CodeOf(err) {
	case sources.TooLarge:
		return status.Error(codes.ResourceExhausted, err.Error())
	case sources.Unreachable, sources.AuthFailed, sources.BadSettings, sources.BadContent:
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "the run did not finish in time (BMCIS_SEARCH_SOURCES_RUN_TIMEOUT)")
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "the run was cancelled")
	}
	return status.Error(codes.Internal, "the run failed; see the source's last error")
}

// errCallEnded: an on-demand run stopped because its caller's call ended
// (a deadline, such as the gateway's request timeout, or a disconnect),
// not because of the source or BMCIS_SEARCH_SOURCES_RUN_TIMEOUT.
var errCallEnded = errors.New("the call ended before the run finished (its deadline, a disconnect, or the service stopping); the run stopped and deleted nothing")

// runSource runs a claimed source and records the run, releasing the
// lease. A failure anywhere deletes nothing and keeps the last cursor.
func (s *Server) runSource(ctx context.Context, c store.Claimed) (*searchv1.SyncSourceResponse, error) {
	start := time.Now()
	// The run ends before its lease does, so no other replica can start
	// the source while this one still writes.
	rctx, cancel := context.WithTimeout(ctx, s.cfg.SourceRunTimeout*9/10)
	defer cancel()
	resp, cursor, err := s.fetchAndApply(rctx, c)
	if err != nil && ctx.Err() != nil {
		// Whatever failed last (often a database call) failed for that.
		err = fmt.Errorf("%w: %w", errCallEnded, ctx.Err())
	}
	result := runOK
	rec := store.RunResult{Cursor: cursor}
	if err != nil {
		result = runFailed
		rec.Err = err.Error()
		if st, ok := status.FromError(err); ok {
			rec.Err = st.Message()
		}
		if c.Every > 0 {
			rec.NextRunAt = time.Now().Add(backoff(c.Failures+1, c.Every))
		}
	} else {
		rec.Counts = store.SyncCounts{Written: int(resp.DocumentsWritten), Unchanged: int(resp.DocumentsUnchanged),
			Failed: int(resp.DocumentsFailed), Deleted: int(resp.DocumentsDeleted)}
		if c.Every > 0 {
			rec.NextRunAt = time.Now().Add(c.Every)
		}
	}
	s.m.sourceRuns.WithLabelValues(c.Kind, result).Inc()
	// Recorded even when the caller went away: the lease must go back.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DBTimeout*4)
	if ferr := s.st.FinishRun(dctx, c.Name, leaseOwner, rec); ferr != nil {
		s.log.WarnContext(ctx, "source run not recorded", "source", c.Name, "error", ferr.Error())
	}
	dcancel()
	if err != nil {
		s.log.WarnContext(ctx, "source run failed", "source", c.Name, "kind", c.Kind, "error", rec.Err)
		return nil, err
	}
	resp.Seconds = time.Since(start).Seconds()
	return resp, nil
}

// backoff is the wait after the n-th failed run in a row: one minute,
// doubling, never longer than the schedule itself or maxBackoff.
func backoff(n int, every time.Duration) time.Duration {
	d := time.Minute
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, every, maxBackoff)
}

// fetchAndApply fetches a source's changes and stores them: writes
// through the ingestion path, then (only when every write succeeded)
// deletions through Store.DeleteDocument.
func (s *Server) fetchAndApply(ctx context.Context, c store.Claimed) (*searchv1.SyncSourceResponse, []byte, error) {
	kind, ok := sources.ByName(c.Kind)
	if !ok {
		return nil, nil, fmt.Errorf("kind %q is not registered in this version of the service", c.Kind)
	}
	cs, err := kind.Fetch(ctx, sources.Request{Name: c.Name, Settings: c.Settings, Cursor: c.Cursor, Env: s.cfg.Sources})
	if err != nil {
		return nil, nil, err
	}
	if err := s.refuseEmptyListing(ctx, c.Name, cs); err != nil {
		return nil, nil, err
	}
	// The sync message below carries no access list, so the receiver gives
	// each document the source's stored default (AddSource set it).
	docs := make([]*searchv1.Document, 0, len(cs.Upserts))
	keep := make([]string, 0, len(cs.Upserts)+len(cs.Unchanged)+len(cs.Skipped))
	for _, f := range cs.Upserts {
		keep = append(keep, sourceDocID(c.Name, f.ID))
		d := &searchv1.Document{ExternalId: f.ID, SourceFile: f.ID, Content: f.Content, FormatName: f.Format, Category: f.Category}
		if !f.UpdatedAt.IsZero() {
			d.UpdatedAt = timestamppb.New(f.UpdatedAt)
		}
		docs = append(docs, d)
	}
	raw := rawIDs(cs)
	cs.Upserts = nil // the documents own the bytes now
	sent := -1
	recv := func() (*searchv1.IngestDocumentsRequest, error) {
		sent++
		if sent == 0 {
			return &searchv1.IngestDocumentsRequest{Sync: &searchv1.SyncSource{Name: c.Name, Root: kind.Root(c.Settings)}}, nil
		}
		if sent > len(docs) {
			return nil, io.EOF
		}
		d := docs[sent-1]
		docs[sent-1] = nil
		return &searchv1.IngestDocumentsRequest{Document: d}, nil
	}
	ing, err := s.ingestStream(ctx, recv, nil, true)
	if err != nil {
		return nil, nil, err
	}
	resp := &searchv1.SyncSourceResponse{DocumentsWritten: ing.DocumentsWritten,
		DocumentsUnchanged: ing.DocumentsUnchanged + int32(len(cs.Unchanged)),
		DocumentsFailed:    ing.DocumentsFailed + int32(len(cs.Skipped)), Failures: ing.Failures, Note: cs.Note}
	for _, sk := range cs.Skipped {
		resp.Failures = append(resp.Failures, &searchv1.IngestFailure{ExternalId: sourceDocID(c.Name, sk.ID), SourceFile: sk.ID, Reason: sk.Reason})
	}
	gone := make([]string, 0, len(cs.Deletes))
	for _, id := range cs.Deletes {
		gone = append(gone, sourceDocID(c.Name, id))
	}
	if cs.Full {
		// Everything the source has now, written, unchanged, skipped or
		// refused, stays; the rest is gone from the source.
		for _, id := range cs.Unchanged {
			keep = append(keep, sourceDocID(c.Name, id))
		}
		for _, sk := range cs.Skipped {
			keep = append(keep, sourceDocID(c.Name, sk.ID))
		}
		dctx, cancel := context.WithTimeout(ctx, s.cfg.IngestTimeout)
		stale, err := s.st.SourceDocumentsExcept(dctx, c.Name, keep)
		cancel()
		if err != nil {
			return nil, nil, dbError(ctx, err)
		}
		gone = append(gone, stale...)
	}
	var maxGen int64
	for _, id := range gone {
		dctx, cancel := s.dbCtx(ctx)
		res, err := s.st.DeleteDocument(dctx, id)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, dbError(ctx, err)
		}
		resp.DocumentsDeleted++
		maxGen = max(maxGen, res.Generation)
	}
	if maxGen > 0 {
		if err := s.feed.WaitApplied(ctx, maxGen); err != nil {
			return nil, nil, dbError(ctx, err)
		}
	}
	return resp, retryFailed(kind, c.Name, cs.Cursor, resp.Failures, raw), nil
}

// sourceDocID is the stored id of a source's file: the receiver trims
// every document id before it adds the source's name (receiver.syncID), so
// a name with surrounding spaces is kept, deleted and retried by its
// trimmed id too.
func sourceDocID(source, id string) string { return source + ":" + strings.TrimSpace(id) }

// rawIDs maps the few ids a trim changes back to the kind's own (its
// cursor's keys), for Kind.Retry.
func rawIDs(cs *sources.ChangeSet) map[string]string {
	var raw map[string]string
	add := func(id string) {
		if t := strings.TrimSpace(id); t != id {
			if raw == nil {
				raw = map[string]string{}
			}
			raw[t] = id
		}
	}
	for _, f := range cs.Upserts {
		add(f.ID)
	}
	for _, sk := range cs.Skipped {
		add(sk.ID)
	}
	return raw
}

// retryFailed returns the run's cursor with what the run skipped or the
// service refused left for the next run to fetch again (Kind.Retry).
func retryFailed(kind *sources.Kind, name string, cursor []byte, failures []*searchv1.IngestFailure, raw map[string]string) []byte {
	if len(failures) == 0 {
		return cursor
	}
	ids := make([]string, 0, len(failures))
	for _, f := range failures {
		id := strings.TrimPrefix(f.GetExternalId(), name+":")
		if r, ok := raw[id]; ok {
			id = r
		}
		ids = append(ids, id)
	}
	return kind.Retry(cursor, ids)
}

// refuseEmptyListing fails a run whose complete listing is empty while the
// source holds documents: an unmounted volume, an emptied branch or a
// sitemap served empty during a deploy looks exactly like that, and
// mirroring it would delete every document. Removing the source is the
// deliberate way to drop them. A listing naming pages that answered gone
// (cs.Deletes) is not empty: each deletion has its own evidence.
func (s *Server) refuseEmptyListing(ctx context.Context, name string, cs *sources.ChangeSet) error {
	if !cs.Full || len(cs.Upserts)+len(cs.Unchanged)+len(cs.Skipped)+len(cs.Deletes) > 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.IngestTimeout)
	held, err := s.st.SourceDocuments(dctx, name)
	cancel()
	if err != nil {
		return dbError(ctx, err)
	}
	if len(held) == 0 {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"the listing is empty; refusing to delete all %d documents: remove the source to drop them", len(held))
}

// RemoveSource deletes a source's documents, then the source. A source the
// service syncs is claimed first, so no run writes meanwhile.
func (s *Server) RemoveSource(ctx context.Context, req *searchv1.RemoveSourceRequest) (*searchv1.RemoveSourceResponse, error) {
	name := req.GetName()
	if err := checkSourceName(name); err != nil {
		return nil, err
	}
	dctx, cancel := s.dbCtx(ctx)
	_, err := s.st.Claim(dctx, name, leaseOwner, s.cfg.SourceRunTimeout)
	cancel()
	switch {
	case errors.Is(err, store.ErrSourceBusy):
		return nil, status.Errorf(codes.Aborted, "source %q is being synced now; try again when that run ends", name)
	case err != nil && !errors.Is(err, store.ErrNotFound): // not found: perhaps a client's source
		return nil, dbError(ctx, err)
	}
	claimed := err == nil
	release := func() {
		if claimed {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DBTimeout)
			_ = s.st.Release(rctx, name, leaseOwner)
			rcancel()
		}
	}
	dctx, cancel = context.WithTimeout(ctx, s.cfg.IngestTimeout)
	ids, err := s.st.SourceDocuments(dctx, name)
	cancel()
	if err != nil {
		release()
		return nil, dbError(ctx, err)
	}
	resp := &searchv1.RemoveSourceResponse{}
	var maxGen int64
	for _, id := range ids {
		dctx, cancel := s.dbCtx(ctx)
		res, err := s.st.DeleteDocument(dctx, id)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			release()
			return nil, dbError(ctx, err)
		}
		resp.DocumentsDeleted++
		maxGen = max(maxGen, res.Generation)
	}
	dctx, cancel = s.dbCtx(ctx)
	err = s.st.DropSource(dctx, name, leaseOwner)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		if resp.DocumentsDeleted == 0 {
			release()
			return nil, status.Errorf(codes.NotFound, "no source named %q", name)
		}
	} else if err != nil {
		release()
		return nil, dbError(ctx, err)
	}
	if maxGen > 0 {
		if err := s.feed.WaitApplied(ctx, maxGen); err != nil {
			return nil, dbError(ctx, err)
		}
	}
	return resp, nil
}

// kickSources wakes this replica's runner (a source was added).
func (s *Server) kickSources() {
	select {
	case s.sourcesKick <- struct{}{}:
	default:
	}
}

// runSources is the runner: it claims due sources one at a time and runs
// them, until ctx ends.
func (s *Server) runSources(ctx context.Context) {
	if !s.cfg.SourcesRunner {
		return
	}
	log := s.log
	t := time.NewTicker(s.cfg.SourcesPoll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			dctx, cancel := s.dbCtx(ctx)
			c, ok, err := s.st.ClaimDue(dctx, leaseOwner, s.cfg.SourceRunTimeout)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "scheduled sources not checked", "error", err.Error())
				}
				break
			}
			if !ok {
				break
			}
			if _, err := s.runSource(ctx, c); err == nil {
				log.InfoContext(ctx, "source synced", "source", c.Name, "kind", c.Kind)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.sourcesKick:
		}
	}
}
