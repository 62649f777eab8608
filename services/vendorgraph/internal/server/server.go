// Package server implements vendorgraphv1.VendorGraphService: it checks
// requests, answers from the cache or the graph, and turns results into the
// contract's messages and typed error details.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/cache"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/graph"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/names"
)

// Defaults and internal bounds; the request limits are platform/limits'.
const (
	defaultCap         = 5
	topEntities        = 5
	maxCandidates      = 10
	defaultSuggestions = 10
)

// cacheKey identifies a GetVendor reply. The normalized name, not the
// vendor id, keys it so a hit needs no database round trip.
type cacheKey struct {
	name                 string
	maxEntities, maxRels int32
	includeRelationships bool
	depth                int32
	maxEvidence          int32
	// scope is the evidence categories, sorted and joined: replies for
	// differently scoped keys differ.
	scope string
	// owner partitions the cache by caller (platform/cacheowner): a hit is
	// always one this caller's own lookup filled.
	owner string
}

// Server answers VendorGraphService calls.
type Server struct {
	vendorgraphv1.UnimplementedVendorGraphServiceServer
	pool  *pgxpool.Pool
	store *graph.Store
	cfg   Config
	cache *cache.Cache[cacheKey, cachedReply]
	// search takes the names an import changed (nil: they are not sent,
	// for tests of the graph alone).
	search searchv1.SearchServiceClient
	// id tells this replica's change notifications from other replicas'.
	id string
}

// New returns a server backed by pool that sends the names an import
// changes to search. Its cache stays off until WatchChanges listens for
// imports made through other replicas.
func New(pool *pgxpool.Pool, cfg Config, search searchv1.SearchServiceClient) *Server {
	s := &Server{
		search: search,
		pool:   pool,
		store:  graph.New(pool),
		cfg:    cfg,
		cache:  cache.New[cacheKey, cachedReply](cfg.CacheSize, cfg.CacheTTL),
		id:     replicaID(),
	}
	s.cache.Suspend()
	return s
}

func replicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	return hex.EncodeToString(b[:])
}

// WatchChanges listens for imports committed by any replica and drops the
// cache on each, until ctx ends. Until it listens, the cache is bypassed.
// Document changes need no notification: the cache holds no evidence.
func (s *Server) WatchChanges(ctx context.Context, log *slog.Logger) {
	s.cache.Watch(ctx, s.pool, []string{importer.NotifyChannel}, s.id, log)
}

// CacheLive reports whether the cache currently serves replies.
func (s *Server) CacheLive() bool { return s.cache.Live() }

// getVendorQuery is a checked GetVendor request.
type getVendorQuery struct {
	name       string
	normalized string
	key        cacheKey
	categories []string // evidence scope; none: every category
	// access is the caller's access set, passed to search as is: search
	// parses it and keeps the evidence inside it (the cached graph part
	// holds no document data, so it is not part of the cache key).
	access []string
}

func checkName(field string, limit limits.Limit, name string) (string, error) {
	if n := names.Len(name); !limit.Allows(n) {
		return "", grpcserver.InvalidArgument(field, "must be %d to %d characters, got %d", limit.Min, limit.Max, n)
	}
	norm := names.Normalize(name)
	if norm == "" {
		return "", grpcserver.InvalidArgument(field, "must contain a letter or a digit")
	}
	return norm, nil
}

func checkGetVendor(req *vendorgraphv1.GetVendorRequest) (getVendorQuery, error) {
	norm, err := checkName("name", limits.VendorName, req.GetName())
	if err != nil {
		return getVendorQuery{}, err
	}
	capOf := func(field string, v int32, limit limits.Limit) (int32, error) {
		switch {
		case !limit.Allows(int(v)):
			return 0, grpcserver.InvalidArgument(field, "must be 0 (default %d) to %d, got %d", defaultCap, limit.Max, v)
		case v == 0:
			return defaultCap, nil
		}
		return v, nil
	}
	maxE, err := capOf("max_entities", req.GetMaxEntities(), limits.VendorEntities)
	if err != nil {
		return getVendorQuery{}, err
	}
	maxR, err := capOf("max_relationships", req.GetMaxRelationships(), limits.VendorRelationships)
	if err != nil {
		return getVendorQuery{}, err
	}
	maxEv, err := capOf("max_evidence", req.GetMaxEvidence(), limits.VendorEvidence)
	if err != nil {
		return getVendorQuery{}, err
	}
	depth := req.GetDepth()
	switch {
	case !limits.VendorDepth.Allows(int(depth)):
		return getVendorQuery{}, grpcserver.InvalidArgument("depth", "must be 0 (default 1) to %d, got %d", limits.VendorDepth.Max, depth)
	case depth == 0:
		depth = 1
	}
	include := req.IncludeRelationships == nil || *req.IncludeRelationships
	cats := slices.Clone(req.GetEvidenceCategories())
	slices.Sort(cats)
	cats = slices.Compact(cats)
	return getVendorQuery{
		name:       req.GetName(),
		normalized: norm,
		categories: cats,
		access:     req.GetEvidenceAccess(),
		key: cacheKey{name: norm, maxEntities: maxE, maxRels: maxR, includeRelationships: include, depth: depth,
			maxEvidence: maxEv, scope: strings.Join(cats, "\x00")},
	}, nil
}

// dbCtx bounds the database work of one call.
func (s *Server) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cfg.DBTimeout <= 0 {
		return context.WithTimeout(ctx, pg.DefaultCallTimeout)
	}
	return context.WithTimeout(ctx, s.cfg.DBTimeout)
}

// cachedReply is a GetVendor reply without its evidence, in wire form
// (encoded), and its vendor's id, whose evidence is asked of search.
type cachedReply struct {
	reply    *vendorgraphv1.GetVendorResponse
	vendorID string
}

// GetVendor returns a vendor's neighbourhood, from the cache when it can,
// and its evidence, from search on every call: the cache holds the graph
// only, which vendorgraph's own imports invalidate, while the documents
// behind the evidence change in search, which tells nobody.
func (s *Server) GetVendor(ctx context.Context, req *vendorgraphv1.GetVendorRequest) (*vendorgraphv1.GetVendorResponse, error) {
	q, err := checkGetVendor(req)
	if err != nil {
		return nil, err
	}
	q.key.owner = cacheowner.FromIncoming(ctx)
	if hit, ok := s.cache.Get(q.key); ok {
		ev, err := s.evidence(ctx, hit.vendorID, q)
		if err != nil {
			return nil, err
		}
		return withEncodedEvidence(hit.reply, ev), nil
	}
	epoch := s.cache.Epoch()
	dctx, cancel := s.dbCtx(ctx)
	defer cancel()
	resp, err := s.lookup(dctx, q)
	if err != nil {
		return nil, pg.CallError(ctx, err)
	}
	if s.cache.Live() { // encoding costs; skip it when Put would drop the entry
		s.cache.Put(q.key, cachedReply{reply: encoded(cachedCopy(resp)), vendorID: resp.GetVendorId()}, epoch)
	}
	ev, err := s.evidence(ctx, resp.GetVendorId(), q)
	if err != nil {
		return nil, err
	}
	addEvidence(resp, ev)
	return resp, nil
}

// evidenceOutage lists the codes of a search that is down or overloaded:
// the graph is answered without its evidence, so a search outage does not
// take the vendor tool down. Any other code is a fault worth surfacing.
var evidenceOutage = map[codes.Code]bool{
	codes.Unavailable: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true, codes.Aborted: true,
}

// evidence asks search what the documents say about the vendor, within the
// caller's read scope (none without a search: tests of the graph alone). It
// is nil, with no error, while search is out (evidenceOutage).
func (s *Server) evidence(ctx context.Context, vendorID string, q getVendorQuery) (*searchv1.GetEntityEvidenceResponse, error) {
	if s.search == nil {
		return &searchv1.GetEntityEvidenceResponse{}, nil
	}
	ev, err := s.search.GetEntityEvidence(ctx, &searchv1.GetEntityEvidenceRequest{
		EntityId: vendorID, Limit: q.key.maxEvidence, Categories: q.categories, Access: q.access})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		st := status.Convert(err)
		if evidenceOutage[st.Code()] {
			return nil, nil
		}
		return nil, status.Errorf(codes.Unavailable, "search, which holds the vendor's evidence, did not answer: %s: %s",
			st.Code(), st.Message())
	}
	return ev, nil
}

// withEncodedEvidence returns the cached reply in wire form with ev's
// fields appended in wire form: a receiver decodes the concatenation as
// one message (protobuf merges repeated fields by appending), so a hit
// still costs no encoding of the graph part.
func withEncodedEvidence(cached *vendorgraphv1.GetVendorResponse, ev *searchv1.GetEntityEvidenceResponse) *vendorgraphv1.GetVendorResponse {
	part := &vendorgraphv1.GetVendorResponse{}
	addEvidence(part, ev)
	b, err := proto.Marshal(part)
	if err != nil {
		b = nil // cannot happen for a valid message
	}
	graph := cached.ProtoReflect().GetUnknown()
	w := &vendorgraphv1.GetVendorResponse{}
	w.ProtoReflect().SetUnknown(append(append(make([]byte, 0, len(graph)+len(b)), graph...), b...))
	return w
}

// encoded returns a message that holds m's wire encoding as unknown fields
// and nothing else. gRPC marshals it by copying those bytes, and a receiver
// decodes them as m's fields, so a cache hit costs no encoding: for a
// 100/500 reply that is most of the hit's server time. Only the wire form
// is right: code here must not read fields of a cached reply.
func encoded(m *vendorgraphv1.GetVendorResponse) *vendorgraphv1.GetVendorResponse {
	b, err := proto.Marshal(m)
	if err != nil {
		return m // cannot happen for a valid message; serve it as it is
	}
	w := &vendorgraphv1.GetVendorResponse{}
	w.ProtoReflect().SetUnknown(b)
	return w
}

// cachedCopy returns a reply that shares resp's parts but says cache_hit.
// Cached replies are shared between calls and never modified.
func cachedCopy(r *vendorgraphv1.GetVendorResponse) *vendorgraphv1.GetVendorResponse {
	return &vendorgraphv1.GetVendorResponse{
		VendorName:             r.VendorName,
		VendorId:               r.VendorId,
		EntityIds:              r.EntityIds,
		RelationshipIds:        r.RelationshipIds,
		Statistics:             r.Statistics,
		TopEntities:            r.TopEntities,
		Entities:               r.Entities,
		Relationships:          r.Relationships,
		LastUpdated:            r.LastUpdated,
		EntitiesTruncated:      r.EntitiesTruncated,
		RelationshipsTruncated: r.RelationshipsTruncated,
		CacheHit:               true,
		Aliases:                r.Aliases,
		Evidence:               r.Evidence,
		EvidenceDocuments:      r.EvidenceDocuments,
		EvidenceChunkCount:     r.EvidenceChunkCount,
		EvidenceUnavailable:    r.EvidenceUnavailable,
	}
}

func (s *Server) lookup(ctx context.Context, q getVendorQuery) (*vendorgraphv1.GetVendorResponse, error) {
	exact, err := s.store.ResolveExact(ctx, q.normalized, maxCandidates+1)
	if err != nil {
		return nil, err
	}
	switch {
	case len(exact) > 1:
		cands := make([]string, 0, min(len(exact), maxCandidates))
		for _, v := range exact[:min(len(exact), maxCandidates)] {
			cands = append(cands, v.Name)
		}
		return nil, ambiguous(q.name, cands)
	case len(exact) == 0:
		cands, err := s.store.Candidates(ctx, q.normalized, s.cfg.MatchThreshold, maxCandidates)
		if err != nil {
			return nil, err
		}
		candNames := make([]string, len(cands))
		for i, c := range cands {
			candNames[i] = c.Name
		}
		if len(cands) >= 2 {
			return nil, ambiguous(q.name, candNames)
		}
		return nil, notFound(q.name, candNames)
	}

	vendor := exact[0]
	nb, err := s.store.Neighbourhood(ctx, vendor, int(q.key.depth))
	if errors.Is(err, graph.ErrTooLarge) {
		return nil, grpcserver.InvalidArgument("depth", "%v; ask for depth 1", err)
	}
	if err != nil {
		return nil, err
	}
	return buildReply(vendor, nb, q.key)
}

func ambiguous(name string, candidates []string) error {
	st := status.New(codes.FailedPrecondition, fmt.Sprintf("vendor name %q is ambiguous: it matches %s; use a full vendor name",
		name, quoteList(candidates)))
	return withDetail(st, &vendorgraphv1.VendorAmbiguousDetail{Name: name, Candidates: candidates})
}

func notFound(name string, suggestions []string) error {
	msg := fmt.Sprintf("vendor %q not found", name)
	if len(suggestions) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", quoteList(suggestions))
	}
	if suggestions == nil {
		suggestions = []string{}
	}
	return withDetail(status.New(codes.NotFound, msg), &vendorgraphv1.VendorNotFoundDetail{Name: name, Suggestions: suggestions})
}

func withDetail(st *status.Status, detail protoadapt.MessageV1) error {
	if withD, err := st.WithDetails(detail); err == nil {
		return withD.Err()
	}
	return st.Err()
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// SuggestVendors returns vendor names close to the text: prefix matches
// first, then by trigram similarity.
func (s *Server) SuggestVendors(ctx context.Context, req *vendorgraphv1.SuggestVendorsRequest) (*vendorgraphv1.SuggestVendorsResponse, error) {
	norm, err := checkName("text", limits.SuggestText, req.GetText())
	if err != nil {
		return nil, err
	}
	limit := req.GetLimit()
	switch {
	case !limits.Suggestions.Allows(int(limit)):
		return nil, grpcserver.InvalidArgument("limit", "must be 0 (default %d) to %d, got %d", defaultSuggestions, limits.Suggestions.Max, limit)
	case limit == 0:
		limit = defaultSuggestions
	}
	dctx, cancel := s.dbCtx(ctx)
	defer cancel()
	cands, err := s.store.Candidates(dctx, norm, s.cfg.MatchThreshold, int(limit))
	if err != nil {
		return nil, pg.CallError(ctx, err)
	}
	resp := &vendorgraphv1.SuggestVendorsResponse{Suggestions: make([]*vendorgraphv1.VendorSuggestion, len(cands))}
	for i, c := range cands {
		resp.Suggestions[i] = &vendorgraphv1.VendorSuggestion{Name: c.Name, VendorId: importer.FormatUUID(c.ID), Score: c.Score}
	}
	return resp, nil
}

// GetGraphStatus counts the graph.
func (s *Server) GetGraphStatus(ctx context.Context, _ *vendorgraphv1.GetGraphStatusRequest) (*vendorgraphv1.GetGraphStatusResponse, error) {
	dctx, cancel := s.dbCtx(ctx)
	defer cancel()
	st, err := s.store.Status(dctx)
	if err != nil {
		return nil, pg.CallError(ctx, err)
	}
	resp := &vendorgraphv1.GetGraphStatusResponse{Vendors: st.Vendors, Entities: st.Entities, Relationships: st.Relationships}
	if st.LastUpdated != nil {
		resp.LastUpdated = timestamppb.New(*st.LastUpdated)
	}
	return resp, nil
}

// ImportGraph validates a whole stream of JSON Lines records, then writes
// them in one transaction; any problem rejects the import and writes nothing.
func (s *Server) ImportGraph(stream grpc.ClientStreamingServer[vendorgraphv1.ImportGraphRequest, vendorgraphv1.ImportGraphResponse]) error {
	ctx := stream.Context()
	start := time.Now()
	// Lines are parsed on every core while the stream is still arriving.
	b, err := importer.Collect(func() (int64, string, error) {
		req, err := stream.Recv()
		if err != nil {
			return 0, "", err
		}
		return req.GetLineNumber(), req.GetLine(), nil
	}, int64(s.cfg.MaxImportLines), runtime.GOMAXPROCS(0))
	if err != nil {
		return fmt.Errorf("receive import lines: %w", err)
	}
	if b.Over() {
		return importRejected(b)
	}
	received := time.Now()

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin import: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := importer.Lock(ctx, tx); err != nil {
		return err
	}
	// References outside the file must already be in the graph; checked even
	// when other problems exist, so one run reports everything.
	existing, err := importer.ExistingEntities(ctx, tx, b.MissingReferences())
	if err != nil {
		return err
	}
	b.ReportDangling(existing)
	if !b.OK() {
		return importRejected(b)
	}
	counts, err := importer.Write(ctx, tx, b, s.id)
	if err != nil {
		return err
	}
	// Search takes the changed names before the import commits: when it
	// cannot, nothing is imported, so its copy never misses a change.
	var relinked importer.Relinked
	if s.search != nil {
		if relinked, err = importer.SyncNames(ctx, tx, s.search, counts); err != nil {
			if st, ok := status.FromError(errors.Unwrap(err)); ok && st.Code() != codes.Unknown {
				return status.Errorf(codes.Unavailable, "import rolled back, nothing written: search did not take the changed names: %s: %s",
					st.Code(), st.Message())
			}
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit import: %w", err)
	}
	committed := time.Now()
	if counts.Changed() {
		s.cache.Invalidate()
	}
	// Best effort: the import is committed whatever happens here.
	if _, err := importer.Analyze(ctx, s.pool, counts); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "import committed, statistics not refreshed", "error", err.Error())
	}
	resp := &vendorgraphv1.ImportGraphResponse{
		Lines:                  b.Lines,
		EntitiesCreated:        int32(counts.EntitiesCreated),
		EntitiesUpdated:        int32(counts.EntitiesUpdated),
		EntitiesUnchanged:      int32(counts.EntitiesUnchanged),
		RelationshipsCreated:   int32(counts.RelationshipsCreated),
		RelationshipsUpdated:   int32(counts.RelationshipsUpdated),
		RelationshipsUnchanged: int32(counts.RelationshipsUnchanged),
		Seconds:                time.Since(start).Seconds(),
	}
	logging.FromContext(ctx).InfoContext(ctx, "graph imported",
		"lines", resp.Lines, "entities_created", resp.EntitiesCreated, "entities_updated", resp.EntitiesUpdated,
		"relationships_created", resp.RelationshipsCreated, "relationships_updated", resp.RelationshipsUpdated,
		"seconds", resp.Seconds, "receive_and_parse_seconds", received.Sub(start).Seconds(),
		"write_seconds", committed.Sub(received).Seconds(), "copy_seconds", counts.CopyTime.Seconds(),
		"entities_seconds", counts.EntitiesTime.Seconds(), "relationships_seconds", counts.RelationshipsTime.Seconds(),
		"mention_names_sent", relinked.Names, "mention_chunks_indexed", relinked.Indexed, "mention_chunks_relinked", relinked.Chunks, "mention_seconds", relinked.Time.Seconds())
	return stream.SendAndClose(resp)
}

// importRejected is INVALID_ARGUMENT with every problem, by line.
func importRejected(b *importer.Batch) error {
	problems, extra := b.Problems()
	detail := &vendorgraphv1.ImportGraphFailure{}
	for _, p := range problems {
		detail.Problems = append(detail.Problems, &vendorgraphv1.ImportProblem{LineNumber: p.Line, Message: p.Message})
	}
	if extra > 0 {
		detail.Problems = append(detail.Problems, &vendorgraphv1.ImportProblem{
			LineNumber: 0, Message: fmt.Sprintf("%d more problems not listed", extra)})
	}
	total := len(problems) + extra
	msg := fmt.Sprintf("import rejected, nothing written: %d problem(s)", total)
	if len(problems) > 0 {
		msg += fmt.Sprintf("; first: line %d: %s", problems[0].Line, problems[0].Message)
	}
	st, err := status.New(codes.InvalidArgument, msg).WithDetails(detail)
	if err != nil {
		return status.Error(codes.InvalidArgument, msg)
	}
	return st.Err()
}
