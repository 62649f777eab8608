package gateway

// Unit-test harness: the gateway against in-process gRPC services that run on
// platform/grpcserver (its real interceptors: service token, request ids,
// metrics, health) with scripted handlers, so every status code, denial and
// header can be produced on demand. Tests against the real services are in
// ../../e2e.

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/bmcis/knowledge/gateway/internal/apierror"
	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

const (
	// The gateway's own (read) credential, and the operators' admin and
	// ingest credentials; the fake services hold their digests and the real
	// server edge applies the product's role table.
	testServiceToken = "test-read-credential-0123456789abcdef"
	testAdminToken   = "test-admin-credential-0123456789abcdef"
	testIngestToken  = "test-ingest-credential-0123456789abcdef"
	keyGood          = "bmcis_good_secret"
	keyExpired       = "bmcis_expired_secret"
	keyRevoked       = "bmcis_revoked_secret"
	keyLimited       = "bmcis_limited_secret"
	// keyUncounted: closed mode while the shared limiter is down.
	keyUncounted = "bmcis_uncounted_secret"
)

// seen records the metadata of the calls a fake received.
type seen struct {
	mu    sync.Mutex
	calls []metadata.MD
}

func (s *seen) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.calls = append(s.calls, md.Copy())
	s.mu.Unlock()
}

func (s *seen) last() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return nil
	}
	return s.calls[len(s.calls)-1]
}

func (s *seen) reset() {
	s.mu.Lock()
	s.calls = nil
	s.mu.Unlock()
}

type fakeAuth struct {
	authv1.UnimplementedAuthServiceServer
	seen
	checkErr atomicErr
	lastOp   string // guarded by seen.mu
}

func errUnavailable() error { return status.Error(codes.Unavailable, "limiter down") }

var ioEOF = io.EOF

type atomicErr struct {
	mu  sync.Mutex
	err error
}

func (a *atomicErr) set(err error) { a.mu.Lock(); a.err = err; a.mu.Unlock() }
func (a *atomicErr) get() error    { a.mu.Lock(); defer a.mu.Unlock(); return a.err }

func (f *fakeAuth) Check(ctx context.Context, req *authv1.CheckRequest) (*authv1.CheckResponse, error) {
	f.record(ctx)
	f.mu.Lock()
	f.lastOp = req.GetOperation()
	f.mu.Unlock()
	if err := f.checkErr.get(); err != nil {
		return nil, err
	}
	limits := rateLimits(100, 1000, 10000)
	resp := &authv1.CheckResponse{Limits: limits, Remaining: rateLimits(99, 999, 9999), ResetInSeconds: 42}
	switch req.GetApiKey() {
	case "":
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_AUTH_REQUIRED
	case keyGood:
		resp.Allowed = true
		resp.Principal = &authv1.Principal{KeyId: "good", Name: "test", Owner: "tests"}
	case keyExpired:
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_AUTH_EXPIRED
	case keyRevoked:
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_AUTH_REVOKED
	case keyLimited:
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_RATE_LIMIT
		resp.Message = "Rate limit exceeded"
		resp.Remaining = rateLimits(0, 450, 8500)
		resp.ResetInSeconds = 17
	case keyUncounted:
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE
		resp.LimiterDegraded = true
		resp.Remaining = nil
		resp.ResetInSeconds = 1
	default:
		resp.DenialReason = authv1.DenialReason_DENIAL_REASON_AUTH_INVALID
	}
	return resp, nil
}

func (f *fakeAuth) CreateKey(ctx context.Context, req *authv1.CreateKeyRequest) (*authv1.CreateKeyResponse, error) {
	f.record(ctx)
	return &authv1.CreateKeyResponse{Key: &authv1.ApiKey{KeyId: "k1", Name: req.GetName(), CreatedAt: timestamppb.Now()}, ApiKey: "bmcis_k1_secret"}, nil
}

func (f *fakeAuth) ListKeys(ctx context.Context, _ *authv1.ListKeysRequest) (*authv1.ListKeysResponse, error) {
	f.record(ctx)
	return &authv1.ListKeysResponse{Keys: []*authv1.ApiKey{{KeyId: "k1", Name: "one"}}}, nil
}

func (f *fakeAuth) RevokeKey(ctx context.Context, req *authv1.RevokeKeyRequest) (*authv1.RevokeKeyResponse, error) {
	f.record(ctx)
	if req.GetKeyId() != "k1" {
		return nil, status.Error(codes.NotFound, "no key "+req.GetKeyId())
	}
	return &authv1.RevokeKeyResponse{Key: &authv1.ApiKey{KeyId: req.GetKeyId(), RevokedAt: timestamppb.Now()}}, nil
}

func (f *fakeAuth) RotateKey(ctx context.Context, req *authv1.RotateKeyRequest) (*authv1.RotateKeyResponse, error) {
	f.record(ctx)
	return &authv1.RotateKeyResponse{Key: &authv1.ApiKey{KeyId: "k2"}, ApiKey: "bmcis_k2_secret", Previous: &authv1.ApiKey{KeyId: req.GetKeyId()}}, nil
}

func (f *fakeAuth) ListAuditEvents(ctx context.Context, req *authv1.ListAuditEventsRequest) (*authv1.ListAuditEventsResponse, error) {
	f.record(ctx)
	return &authv1.ListAuditEventsResponse{Events: []*authv1.AuditEvent{{
		Time: timestamppb.Now(), Principal: "good", Tool: "GET /v1/chunks", ChunkIds: []int64{101}, Outcome: "ok",
	}}}, nil
}

func (f *fakeAuth) AppendAuditEvents(ctx context.Context, req *authv1.AppendAuditEventsRequest) (*authv1.AppendAuditEventsResponse, error) {
	return &authv1.AppendAuditEventsResponse{Appended: int32(len(req.GetEvents()))}, nil
}

type fakeSearch struct {
	searchv1.UnimplementedSearchServiceServer
	seen
	mu       sync.Mutex
	uploaded map[string][]byte // documents received by IngestDocuments, reassembled
}

// Search scripts its answer from the query: "code:N" fails with gRPC code N,
// "slow" sleeps past any test deadline, anything else returns two results.
func (f *fakeSearch) Search(ctx context.Context, req *searchv1.SearchRequest) (*searchv1.SearchResponse, error) {
	f.record(ctx)
	q := req.GetQuery()
	if c, ok := strings.CutPrefix(q, "code:"); ok {
		n, _ := strconv.Atoi(c)
		if codes.Code(n) == codes.ResourceExhausted {
			return nil, status.Error(codes.ResourceExhausted, "too busy")
		}
		return nil, status.Error(codes.Code(n), "scripted "+codes.Code(n).String())
	}
	if q == "slow" {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
	mode := req.GetMode()
	if mode == searchv1.RetrievalMode_RETRIEVAL_MODE_UNSPECIFIED {
		mode = searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
	}
	return &searchv1.SearchResponse{
		Mode: mode, TotalAvailable: 2, SearchTimeMs: 1.5, QueryTerms: []string{q},
		Results: []*searchv1.SearchResult{
			{Rank: 1, HybridScore: 0.91, Bm25Score: 0.8, SimilarityScore: 0.7, Chunk: &searchv1.Chunk{ChunkId: 101, Title: "Cloud providers", SourceFile: "docs/cloud.md", ChunkText: "AWS, Azure and GCP compared for " + q}},
			{Rank: 2, HybridScore: 0.55, Bm25Score: 0.4, SimilarityScore: 0.6, Chunk: &searchv1.Chunk{ChunkId: 202, Title: "Storage", SourceFile: "docs/storage.md", ChunkText: "Object storage notes"}},
		},
	}, nil
}

func (f *fakeSearch) GetChunks(ctx context.Context, req *searchv1.GetChunksRequest) (*searchv1.GetChunksResponse, error) {
	f.record(ctx)
	resp := &searchv1.GetChunksResponse{}
	for _, id := range req.GetChunkIds() {
		if id == 101 {
			resp.Chunks = append(resp.Chunks, &searchv1.Chunk{ChunkId: 101, Title: "Cloud providers"})
		} else {
			resp.MissingIds = append(resp.MissingIds, id)
		}
	}
	return resp, nil
}

func (f *fakeSearch) DeleteDocument(ctx context.Context, req *searchv1.DeleteDocumentRequest) (*searchv1.DeleteDocumentResponse, error) {
	f.record(ctx)
	return &searchv1.DeleteDocumentResponse{ChunksDeleted: 3}, nil
}

func (f *fakeSearch) ListDocuments(ctx context.Context, req *searchv1.ListDocumentsRequest) (*searchv1.ListDocumentsResponse, error) {
	f.record(ctx)
	return &searchv1.ListDocumentsResponse{Documents: []*searchv1.StoredDocument{
		{ExternalId: "doc-1", Category: "docs", Access: []string{req.GetPrincipal()}, ChunkCount: 3}}}, nil
}

func (f *fakeSearch) GetDocument(ctx context.Context, req *searchv1.GetDocumentRequest) (*searchv1.GetDocumentResponse, error) {
	f.record(ctx)
	return &searchv1.GetDocumentResponse{Document: &searchv1.StoredDocument{ExternalId: req.GetExternalId(), Access: []string{"group:hr"}}}, nil
}

func (f *fakeSearch) ListCategories(ctx context.Context, _ *searchv1.ListCategoriesRequest) (*searchv1.ListCategoriesResponse, error) {
	f.record(ctx)
	return &searchv1.ListCategoriesResponse{Categories: []*searchv1.Category{{Name: "docs", DocumentCount: 2}}}, nil
}

func (f *fakeSearch) GetIndexStatus(ctx context.Context, _ *searchv1.GetIndexStatusRequest) (*searchv1.GetIndexStatusResponse, error) {
	f.record(ctx)
	return &searchv1.GetIndexStatusResponse{Documents: 2, Chunks: 5, EmbedderProvider: "builtin",
		ModelTrainedAt: timestamppb.New(time.Now().Add(-3 * time.Hour)), ModelTrainedChunks: 2, ModelTermCoverage: 0.62,
		RetrainPending: true, RetrainReason: "the model knows 62% of the indexed terms"}, nil
}

// IngestDocuments reassembles documents sent in parts and counts them.
func (f *fakeSearch) IngestDocuments(stream grpc.ClientStreamingServer[searchv1.IngestDocumentsRequest, searchv1.IngestDocumentsResponse]) error {
	f.record(stream.Context())
	resp := &searchv1.IngestDocumentsResponse{}
	var last string
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uploaded == nil {
		f.uploaded = map[string][]byte{}
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(resp)
		}
		if err != nil {
			return err
		}
		if d := req.GetDocument(); d != nil {
			resp.DocumentsReceived++
			last = d.GetSourceFile()
			if strings.HasSuffix(last, ".exe") || d.GetContentSize() == 0 && len(d.GetContent()) == 0 {
				// As the real service: an unknown format or an empty file fails alone.
				resp.DocumentsFailed++
				resp.Failures = append(resp.Failures, &searchv1.IngestFailure{ExternalId: last, SourceFile: last, Reason: "not a file of a known format or empty"})
				continue
			}
			resp.DocumentsWritten++
			f.uploaded[last] = append([]byte(nil), d.GetContent()...)
		}
		f.uploaded[last] = append(f.uploaded[last], req.GetContentPart()...)
	}
}

func (f *fakeSearch) ListSources(ctx context.Context, _ *searchv1.ListSourcesRequest) (*searchv1.ListSourcesResponse, error) {
	f.record(ctx)
	return &searchv1.ListSourcesResponse{Sources: []*searchv1.Source{{Name: "handbook", Root: "/srv/handbook", DocumentCount: 4, ChunkCount: 9,
		LastSyncAt: timestamppb.New(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)), LastWritten: 2, LastUnchanged: 2, LastDeleted: 1,
		Kind: "git", EverySeconds: 900, LastStatus: "failed", ConsecutiveFailures: 2}}}, nil
}

func (f *fakeSearch) AddSource(ctx context.Context, req *searchv1.AddSourceRequest) (*searchv1.AddSourceResponse, error) {
	f.record(ctx)
	return &searchv1.AddSourceResponse{Source: &searchv1.Source{Name: req.GetName(), Kind: req.GetKind(),
		Settings: req.GetSettings(), EverySeconds: req.GetEverySeconds()}}, nil
}

func (f *fakeSearch) SyncSource(ctx context.Context, _ *searchv1.SyncSourceRequest) (*searchv1.SyncSourceResponse, error) {
	f.record(ctx)
	return &searchv1.SyncSourceResponse{DocumentsWritten: 3, DocumentsDeleted: 1}, nil
}

func (f *fakeSearch) RemoveSource(ctx context.Context, _ *searchv1.RemoveSourceRequest) (*searchv1.RemoveSourceResponse, error) {
	f.record(ctx)
	return &searchv1.RemoveSourceResponse{DocumentsDeleted: 4}, nil
}

type fakeVendor struct {
	vendorgraphv1.UnimplementedVendorGraphServiceServer
	seen
}

func (f *fakeVendor) GetVendor(ctx context.Context, req *vendorgraphv1.GetVendorRequest) (*vendorgraphv1.GetVendorResponse, error) {
	f.record(ctx)
	switch req.GetName() {
	case "Unknown Co":
		st, _ := status.New(codes.NotFound, "no vendor named Unknown Co").WithDetails(&vendorgraphv1.VendorNotFoundDetail{Name: req.GetName(), Suggestions: []string{"Acme Corp"}})
		return nil, st.Err()
	case "Acme":
		st, _ := status.New(codes.FailedPrecondition, "several vendors match Acme").WithDetails(&vendorgraphv1.VendorAmbiguousDetail{Name: req.GetName(), Candidates: []string{"Acme Corp", "Acme Labs"}})
		return nil, st.Err()
	case "Acme Corp":
		return acmeNeighbourhood(), nil
	}
	return &vendorgraphv1.GetVendorResponse{VendorName: req.GetName(), VendorId: "v1", Statistics: &vendorgraphv1.VendorStatistics{EntityCount: 1}}, nil
}

// acmeNeighbourhood is a vendor with entities of three types, labelled
// relationships and evidence, for the dashboard's picture.
func acmeNeighbourhood() *vendorgraphv1.GetVendorResponse {
	v := &vendorgraphv1.GetVendorResponse{VendorName: "Acme Corp", VendorId: "v1",
		Statistics:         &vendorgraphv1.VendorStatistics{EntityCount: 5, RelationshipCount: 6},
		EvidenceChunkCount: 4,
		EvidenceDocuments: []*vendorgraphv1.EvidenceDocument{
			{DocumentId: "vendor-management/vendor-tiers.md", SourceFile: "vendor-management/vendor-tiers.md", MentionCount: 3, ChunkCount: 2},
			{DocumentId: "vendor-management/vendor-slas.md", SourceFile: "vendor-management/vendor-slas.md", MentionCount: 1, ChunkCount: 1},
		},
		Evidence: []*vendorgraphv1.EvidenceChunk{
			{ChunkId: 41, DocumentId: "vendor-management/vendor-tiers.md", SourceFile: "vendor-management/vendor-tiers.md", MentionCount: 2, Snippet: "Acme Corp (payroll and HR) is a tier 1 vendor."},
			{ChunkId: 57, DocumentId: "vendor-management/vendor-slas.md", SourceFile: "vendor-management/vendor-slas.md", MentionCount: 1, Snippet: "...payroll corrections with Acme Corp."},
		},
	}
	for _, e := range []struct{ id, name, typ string }{
		{"e1", "Acme Cloud Platform", "PRODUCT"}, {"e2", "Acme Vault Backup", "PRODUCT"},
		{"e3", "Jane Doe", "PERSON"}, {"e4", "Springfield", "LOCATION"}, {"e5", "Raj Patel", "PERSON"},
	} {
		v.Entities = append(v.Entities, &vendorgraphv1.Entity{EntityId: e.id, Name: e.name, EntityType: e.typ, Confidence: 0.9})
	}
	for _, r := range []struct{ id, src, srcName, dst, dstName, typ string }{
		{"r1", "v1", "Acme Corp", "e1", "Acme Cloud Platform", "PRODUCES"}, {"r2", "v1", "Acme Corp", "e2", "Acme Vault Backup", "PRODUCES"},
		{"r3", "e3", "Jane Doe", "v1", "Acme Corp", "WORKS_FOR"}, {"r4", "v1", "Acme Corp", "e4", "Springfield", "HEADQUARTERED_IN"},
		{"r5", "e5", "Raj Patel", "v1", "Acme Corp", "WORKS_FOR"}, {"r6", "e2", "Acme Vault Backup", "e1", "Acme Cloud Platform", "INTEGRATES_WITH"},
	} {
		v.Relationships = append(v.Relationships, &vendorgraphv1.Relationship{RelationshipId: r.id, SourceId: r.src, SourceName: r.srcName,
			TargetId: r.dst, TargetName: r.dstName, RelationshipType: r.typ, Confidence: 0.9})
	}
	return v
}

func (f *fakeVendor) SuggestVendors(ctx context.Context, req *vendorgraphv1.SuggestVendorsRequest) (*vendorgraphv1.SuggestVendorsResponse, error) {
	f.record(ctx)
	return &vendorgraphv1.SuggestVendorsResponse{Suggestions: []*vendorgraphv1.VendorSuggestion{{Name: "Acme Corp", VendorId: "v1", Score: 0.9}}}, nil
}

func (f *fakeVendor) GetGraphStatus(ctx context.Context, _ *vendorgraphv1.GetGraphStatusRequest) (*vendorgraphv1.GetGraphStatusResponse, error) {
	f.record(ctx)
	return &vendorgraphv1.GetGraphStatusResponse{Vendors: 1, Entities: 3, Relationships: 2}, nil
}

// fakeService is one running fake: gRPC on a loopback port, /metrics on another.
type fakeService struct {
	name    string
	addr    string
	metrics string
	srv     *grpcserver.Server
	cancel  context.CancelFunc
	done    chan struct{}
	ms      *httptest.Server
	once    sync.Once
}

// stop ends the fake as a stopped process would: gRPC and /metrics go away.
func (f *fakeService) stop() {
	f.once.Do(func() {
		f.cancel()
		<-f.done
		f.ms.Close()
	})
}

func startFake(t testing.TB, name string, register func(*grpcserver.Server), extra ...prometheus.Collector) *fakeService {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpcserver.New(grpcserver.Settings{Name: name, LogLevel: "error", ShutdownTimeout: time.Second, Credentials: rpcauth.Credentials{
		rpcauth.Read: rpcauth.DigestOf(testServiceToken), rpcauth.Ingest: rpcauth.DigestOf(testIngestToken), rpcauth.Admin: rpcauth.DigestOf(testAdminToken),
	}},
		grpcserver.WithLogOutput(io.Discard))
	register(srv)
	for _, c := range extra {
		srv.Registry().MustRegister(c)
	}
	reg := srv.Registry().(*prometheus.Registry)
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeService{name: name, addr: lis.Addr().String(), metrics: ms.URL + "/metrics", srv: srv, cancel: cancel, done: make(chan struct{}), ms: ms}
	go func() {
		defer close(f.done)
		_ = srv.Serve(ctx, lis)
	}()
	t.Cleanup(f.stop)
	return f
}

// stack is a gateway in front of the three fakes.
type stack struct {
	t                      testing.TB
	gw                     *Gateway
	srv                    *httptest.Server
	url                    string
	auth                   *fakeAuth
	search                 *fakeSearch
	vendor                 *fakeVendor
	fakes                  map[string]*fakeService
	logs                   *syncBuffer
	cacheHits, cacheMisses prometheus.Counter
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newStack starts the fakes and a gateway; env overrides configuration.
func newStack(t testing.TB, env map[string]string) *stack {
	t.Helper()
	s := &stack{t: t, auth: &fakeAuth{}, search: &fakeSearch{}, vendor: &fakeVendor{}, fakes: map[string]*fakeService{}, logs: &syncBuffer{}}
	s.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{Name: "bmcis_search_cache_hits_total", Help: "h"})
	s.cacheMisses = prometheus.NewCounter(prometheus.CounterOpts{Name: "bmcis_search_cache_misses_total", Help: "m"})
	s.fakes[backends.Search] = startFake(t, backends.Search, func(g *grpcserver.Server) { searchv1.RegisterSearchServiceServer(g.GRPC(), s.search) }, s.cacheHits, s.cacheMisses)
	s.fakes[backends.VendorGraph] = startFake(t, backends.VendorGraph, func(g *grpcserver.Server) { vendorgraphv1.RegisterVendorGraphServiceServer(g.GRPC(), s.vendor) })
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bmcis_auth_checks_total", Help: "c"}, []string{"result"})
	checks.WithLabelValues("allowed").Add(10)
	checks.WithLabelValues("rate_limit").Add(3)
	checks.WithLabelValues("auth_invalid").Add(2)
	s.fakes[backends.Auth] = startFake(t, backends.Auth, func(g *grpcserver.Server) { authv1.RegisterAuthServiceServer(g.GRPC(), s.auth) }, checks)

	vars := map[string]string{
		"BMCIS_SERVICE_TOKEN":           testServiceToken,
		"BMCIS_SEARCH_ADDR":             s.fakes[backends.Search].addr,
		"BMCIS_VENDORGRAPH_ADDR":        s.fakes[backends.VendorGraph].addr,
		"BMCIS_AUTH_ADDR":               s.fakes[backends.Auth].addr,
		"BMCIS_SEARCH_METRICS_URL":      s.fakes[backends.Search].metrics,
		"BMCIS_VENDORGRAPH_METRICS_URL": s.fakes[backends.VendorGraph].metrics,
		"BMCIS_AUTH_METRICS_URL":        s.fakes[backends.Auth].metrics,
		"BMCIS_MCP_HEALTH_URL":          "off",
		"BMCIS_GATEWAY_METRICS_ADDR":    "off",
		"BMCIS_GATEWAY_HEALTH_INTERVAL": "100ms",
		"BMCIS_GATEWAY_HEALTH_TIMEOUT":  "300ms",
		"BMCIS_GATEWAY_STATS_INTERVAL":  "200ms",
		"BMCIS_LOG_LEVEL":               "debug",
	}
	for k, v := range env {
		vars[k] = v
	}
	r := config.FromMap(vars)
	cfg := settings.Load(r)
	require.NoError(t, r.Err())
	var logOut io.Writer = s.logs
	if vars["BMCIS_TEST_DISCARD_LOGS"] == "1" { // benchmarks: log as in production, keep nothing
		logOut = io.Discard
	}
	gw, err := New(cfg, logging.New(logOut, "gateway", cfg.LogLevel))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gw.Start(ctx)
	s.gw = gw
	s.srv = httptest.NewServer(gw.Handler())
	s.url = s.srv.URL
	t.Cleanup(func() {
		s.srv.Close()
		cancel()
		gw.Close()
	})
	s.waitConnected(backends.Search, backends.VendorGraph, backends.Auth)
	return s
}

func (s *stack) waitConnected(names ...string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		for _, n := range names {
			if p := s.gw.monitor.Probe(n); p == nil || p.State().Status != health.StatusConnected {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "services did not turn connected")
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (r response) errBody(t testing.TB) apierror.Body {
	t.Helper()
	var e apierror.Body
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.NotNil(t, e.Details, "details must be an array: %s", r.body)
	return e
}

func (s *stack) do(method, path string, body string, headers ...string) response {
	s.t.Helper()
	return doReq(s.t, method, s.url+path, body, headers...)
}

func doReq(t testing.TB, method, url, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func key(k string) []string { return []string{rest.HeaderAPIKey, k} }

// rateLimits is a minute/hour/day reply as the auth service sends it.
func rateLimits(minute, hour, day int64) *authv1.RateLimits {
	return &authv1.RateLimits{Tiers: []*authv1.TierLimit{
		{Tier: "minute", Value: minute}, {Tier: "hour", Value: hour}, {Tier: "day", Value: day}}}
}
