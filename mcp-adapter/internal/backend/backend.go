// Package backend calls the search, vendorgraph and auth services with
// per-call deadlines and converts their replies into the adapter's model.
//
// Connections come from platform/grpcclient, whose service config retries
// UNAVAILABLE with exponential backoff (3 attempts, 50 ms doubling to
// 500 ms); every call here is read-only, so those retries are safe. Each
// backend has its own connection and deadline: one that is down makes only
// the tools that need it answer SERVICE_UNAVAILABLE.
package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/answerversion"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/dbhealth"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/platform/readscope"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/indexwatch"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
)

// Timeouts are the per-call deadlines.
type Timeouts struct {
	Search      time.Duration
	VendorGraph time.Duration
	Auth        time.Duration
}

// Clients are the three backends.
type Clients struct {
	Search      searchv1.SearchServiceClient
	VendorGraph vendorgraphv1.VendorGraphServiceClient
	Auth        authv1.AuthServiceClient
	Timeouts    Timeouts

	conns map[string]*grpc.ClientConn
}

// Addrs are the backends' addresses.
type Addrs struct {
	Search, VendorGraph, Auth string
}

// Flow-control windows of the backend connections, fixed. gRPC's default
// sizes its windows by probing the bandwidth-delay product: every reply's
// data is followed by a window update and a PING, one more write and read
// per call on each connection (issue 32). A fixed window is enough here:
// the backends are near and the one stream (WatchIndex, indexwatch)
// carries a few bytes a second; a reply larger than a stream's window
// (get_chunks of many big chunks, before the budget cuts the answer) waits
// one local round trip for credit, where gRPC's default starts at 64 KiB.
const (
	streamWindow = 1 << 20
	connWindow   = 8 << 20
)

// Dial connects (lazily) to the three backends with the service token.
func Dial(addrs Addrs, token string, t Timeouts, opts ...grpc.DialOption) (*Clients, error) {
	opts = append([]grpc.DialOption{
		grpc.WithStaticStreamWindowSize(streamWindow),
		grpc.WithStaticConnWindowSize(connWindow),
	}, opts...)
	conns := map[string]*grpc.ClientConn{}
	for name, addr := range map[string]string{"search": addrs.Search, "vendorgraph": addrs.VendorGraph, "auth": addrs.Auth} {
		cc, err := grpcclient.Dial(addr, token, opts...)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		conns[name] = cc
	}
	return &Clients{
		Search:      searchv1.NewSearchServiceClient(conns["search"]),
		VendorGraph: vendorgraphv1.NewVendorGraphServiceClient(conns["vendorgraph"]),
		Auth:        authv1.NewAuthServiceClient(conns["auth"]),
		Timeouts:    t,
		conns:       conns,
	}, nil
}

// Close closes the connections Dial opened.
func (c *Clients) Close() {
	for _, cc := range c.conns {
		_ = cc.Close()
	}
}

// DatabaseUnavailable is a backend's health state while it serves but
// reports its PostgreSQL unreachable (health service dbhealth.HealthService).
const DatabaseUnavailable = "DATABASE_UNAVAILABLE"

// Health asks each backend's gRPC health service, within timeout, and
// returns "SERVING", "NOT_SERVING", DatabaseUnavailable or the failure per
// backend. A backend without a database health service (NotFound) is judged
// by its overall status alone.
func (c *Clients) Health(ctx context.Context, timeout time.Duration) map[string]string {
	out := map[string]string{}
	for name, cc := range c.conns {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		hc := healthpb.NewHealthClient(cc)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		switch {
		case err != nil:
			out[name] = status.Code(err).String()
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			out[name] = resp.GetStatus().String()
		default:
			out[name] = resp.GetStatus().String()
			db, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: dbhealth.HealthService})
			if err == nil && db.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
				out[name] = DatabaseUnavailable
			}
		}
		cancel()
	}
	return out
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// Check authenticates key and consumes one rate-limit unit.
func (c *Clients) Check(ctx context.Context, key, operation string) (*authv1.CheckResponse, error) {
	return c.CheckLease(ctx, key, operation, 0)
}

// CheckLease is Check asking auth to prepay leaseUnits more units for the
// key's next calls of operation (allowcache); auth decides how many.
func (c *Clients) CheckLease(ctx context.Context, key, operation string, leaseUnits int32) (*authv1.CheckResponse, error) {
	ctx, cancel := withTimeout(ctx, c.Timeouts.Auth)
	defer cancel()
	// The adapter's operations are its tool names: the auth service refuses
	// a tool outside the key's tool scope.
	req := &authv1.CheckRequest{ApiKey: key, Operation: operation, Tool: operation, ClientAddress: clientAddress(ctx),
		LeaseUnits: leaseUnits}
	if id, ok := oauth.FromContext(ctx); ok {
		// A verified access token: auth decides on its subject and scopes.
		req.ApiKey = ""
		req.Oauth = &authv1.OAuthSubject{Issuer: id.Issuer, Subject: id.Subject, Scopes: id.Scopes, ClientId: id.ClientID, Groups: id.Groups}
	}
	return c.Auth.Check(ctx, req)
}

// ReleaseLease gives the unspent units of a lease back to auth and returns
// how many it refunded (allowcache.ReleaseFunc).
func (c *Clients) ReleaseLease(ctx context.Context, r allowcache.Release) (int64, error) {
	req := &authv1.ReleaseLeaseRequest{KeyId: r.KeyID, LeaseId: r.LeaseID, Tool: r.Tool,
		UnusedUnits: int32(min(r.Units, ratelimit.MaxLeaseUnits))}
	if !r.LastUsed.IsZero() {
		req.LastUsed = timestamppb.New(r.LastUsed)
	}
	resp, err := c.Auth.ReleaseLease(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("release lease of key %s: %w", r.KeyID, err)
	}
	return int64(resp.GetRefundedUnits()), nil
}

type clientAddressKey struct{}

// WithClientAddress returns ctx naming the address of the end user's
// connection (the HTTP transport sets it; stdio has none), which Check
// sends so auth can budget failed checks per client.
func WithClientAddress(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddressKey{}, addr)
}

// ClientAddress is the end user's address WithClientAddress stored ("" over
// stdio).
func ClientAddress(ctx context.Context) string { return clientAddress(ctx) }

func clientAddress(ctx context.Context) string {
	a, _ := ctx.Value(clientAddressKey{}).(string)
	return a
}

// readScope is the search scope of the caller's key (platform/readscope):
// every search read made with ctx sends it.
func readScope(ctx context.Context) *searchv1.ReadScope {
	cats, set := readscope.Categories(ctx), readscope.Access(ctx)
	if cats == nil && set == nil {
		return nil
	}
	return &searchv1.ReadScope{Categories: cats, Access: set}
}

// readMask is the read mask of paths (nil: the whole answer).
func readMask(paths []string) *fieldmaskpb.FieldMask {
	if paths == nil {
		return nil
	}
	return &fieldmaskpb.FieldMask{Paths: paths}
}

// answeredAt is the index version (indexwatch.Version) search's response
// header md names; empty when it names none (an older search, or a
// credential other than the adapter's), so that the answer is not kept.
func answeredAt(md metadata.MD) string {
	v, ok := answerversion.From(md)
	if !ok {
		return ""
	}
	return indexwatch.Version(v)
}

// SearchPage runs one page of a hybrid query. read lists the fields of the
// answer the caller will read (SearchRequest.read_mask; nil: all): the
// service reads and sends no others. version is the index version search
// computed it at (answeredAt).
func (c *Clients) SearchPage(ctx context.Context, query string, offset, limit int, read []string) (page *searchv1.SearchResponse, version string, err error) {
	ctx, cancel := withTimeout(cacheowner.Outgoing(ctx), c.Timeouts.Search)
	defer cancel()
	var md metadata.MD
	page, err = c.Search.Search(ctx, &searchv1.SearchRequest{
		Query:    query,
		Mode:     searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
		Offset:   int32(offset),
		Limit:    int32(limit),
		Scope:    readScope(ctx),
		ReadMask: readMask(read),
	}, grpc.Header(&md))
	if err != nil {
		return nil, "", err
	}
	return page, answeredAt(md), nil
}

// GetChunks fetches chunks by id, in the order asked, and the ids missing.
// read lists the fields the caller will read (GetChunksRequest.read_mask;
// nil: all). version is the index version search read them at
// (answeredAt).
func (c *Clients) GetChunks(ctx context.Context, ids []int64, read []string) (chunks []*searchv1.Chunk, missing []int64, version string, err error) {
	ctx, cancel := withTimeout(ctx, c.Timeouts.Search)
	defer cancel()
	var md metadata.MD
	resp, err := c.Search.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: ids, Scope: readScope(ctx), ReadMask: readMask(read)}, grpc.Header(&md))
	if err != nil {
		return nil, nil, "", err
	}
	return resp.GetChunks(), resp.GetMissingIds(), answeredAt(md), nil
}

// Categories lists the indexed document categories, largest first.
func (c *Clients) Categories(ctx context.Context) ([]string, error) {
	ctx, cancel := withTimeout(ctx, c.Timeouts.Search)
	defer cancel()
	resp, err := c.Search.ListCategories(ctx, &searchv1.ListCategoriesRequest{Scope: readScope(ctx)})
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(resp.GetCategories())
	slices.SortStableFunc(sorted, func(a, b *searchv1.Category) int {
		return cmp.Compare(b.GetDocumentCount(), a.GetDocumentCount())
	})
	out := make([]string, 0, len(sorted))
	for _, cat := range sorted {
		if cat.GetName() != "" {
			out = append(out, cat.GetName())
		}
	}
	return out, nil
}

// NotFoundError is a vendor name that matches no vendor.
type NotFoundError struct {
	Name        string
	Suggestions []string
}

func (e *NotFoundError) Error() string { return "vendor " + e.Name + " not found" }

// AmbiguousError is a vendor name that matches several vendors.
type AmbiguousError struct {
	Name       string
	Candidates []string
}

func (e *AmbiguousError) Error() string { return "vendor " + e.Name + " is ambiguous" }

// VendorRequest asks for a vendor's neighbourhood.
type VendorRequest struct {
	Name                 string
	MaxEntities          int
	MaxRelationships     int
	IncludeRelationships bool
	MaxEvidence          int
}

// GetVendor returns a vendor's neighbourhood. An unknown name is a
// *NotFoundError, an ambiguous one an *AmbiguousError.
func (c *Clients) GetVendor(ctx context.Context, r VendorRequest) (model.Vendor, error) {
	ctx, cancel := withTimeout(cacheowner.Outgoing(ctx), c.Timeouts.VendorGraph)
	defer cancel()
	include := r.IncludeRelationships
	resp, err := c.VendorGraph.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{
		Name:                 r.Name,
		MaxEntities:          int32(r.MaxEntities),
		MaxRelationships:     int32(r.MaxRelationships),
		IncludeRelationships: &include,
		Depth:                1,
		MaxEvidence:          int32(r.MaxEvidence),
		// Evidence stays inside the categories the caller's key may read.
		EvidenceCategories: readscope.Categories(ctx),
		EvidenceAccess:     readscope.Access(ctx),
	})
	if err != nil {
		return model.Vendor{}, vendorError(r.Name, err)
	}
	return vendor(resp), nil
}

func vendorError(name string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		nf := &NotFoundError{Name: name}
		for _, d := range st.Details() {
			if x, ok := d.(*vendorgraphv1.VendorNotFoundDetail); ok {
				nf.Suggestions = x.GetSuggestions()
			}
		}
		return nf
	case codes.FailedPrecondition:
		for _, d := range st.Details() {
			if x, ok := d.(*vendorgraphv1.VendorAmbiguousDetail); ok {
				return &AmbiguousError{Name: name, Candidates: x.GetCandidates()}
			}
		}
	}
	return err
}

// SuggestVendors returns up to limit vendor names close to text.
func (c *Clients) SuggestVendors(ctx context.Context, text string, limit int) ([]string, error) {
	ctx, cancel := withTimeout(ctx, c.Timeouts.VendorGraph)
	defer cancel()
	resp, err := c.VendorGraph.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: text, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resp.GetSuggestions()))
	for _, s := range resp.GetSuggestions() {
		out = append(out, s.GetName())
	}
	return out, nil
}

func vendor(r *vendorgraphv1.GetVendorResponse) model.Vendor {
	v := model.Vendor{
		VendorName:             r.GetVendorName(),
		VendorID:               r.GetVendorId(),
		EntityIDs:              r.GetEntityIds(),
		RelationshipIDs:        r.GetRelationshipIds(),
		EntitiesTruncated:      r.GetEntitiesTruncated(),
		RelationshipsTruncated: r.GetRelationshipsTruncated(),
		CacheHit:               r.GetCacheHit(),
		Aliases:                r.GetAliases(),
		EvidenceChunkCount:     int(r.GetEvidenceChunkCount()),
		EvidenceUnavailable:    r.GetEvidenceUnavailable(),
	}
	for _, e := range r.GetEvidence() {
		v.Evidence = append(v.Evidence, model.EvidenceChunk{ChunkID: e.GetChunkId(), DocumentID: e.GetDocumentId(), SourceFile: e.GetSourceFile(),
			MentionCount: int(e.GetMentionCount()), Snippet: e.GetSnippet()})
	}
	for _, d := range r.GetEvidenceDocuments() {
		v.EvidenceDocuments = append(v.EvidenceDocuments, model.EvidenceDocument{DocumentID: d.GetDocumentId(),
			SourceFile: d.GetSourceFile(), MentionCount: int(d.GetMentionCount()), ChunkCount: int(d.GetChunkCount())})
	}
	if st := r.GetStatistics(); st != nil {
		v.Statistics = model.VendorStatistics{
			EntityCount:                  int(st.GetEntityCount()),
			RelationshipCount:            int(st.GetRelationshipCount()),
			EntityTypeDistribution:       intMap(st.GetEntityTypeDistribution()),
			RelationshipTypeDistribution: intMap(st.GetRelationshipTypeDistribution()),
		}
	}
	if r.GetLastUpdated() != nil {
		v.LastUpdated = r.GetLastUpdated().AsTime()
	}
	for _, e := range r.GetTopEntities() {
		v.TopEntities = append(v.TopEntities, entity(e))
	}
	for _, e := range r.GetEntities() {
		v.Entities = append(v.Entities, entity(e))
	}
	for _, rel := range r.GetRelationships() {
		m := model.Relationship{
			RelationshipID:   rel.GetRelationshipId(),
			SourceID:         rel.GetSourceId(),
			TargetID:         rel.GetTargetId(),
			RelationshipType: rel.GetRelationshipType(),
			Confidence:       rel.GetConfidence(),
			SourceName:       rel.GetSourceName(),
			TargetName:       rel.GetTargetName(),
		}
		if rel.GetMetadata() != nil {
			m.Metadata = rel.GetMetadata().AsMap()
		}
		if rel.GetUpdatedAt() != nil {
			m.UpdatedAt = rel.GetUpdatedAt().AsTime()
		}
		v.Relationships = append(v.Relationships, m)
	}
	return v
}

func entity(e *vendorgraphv1.Entity) model.Entity {
	m := model.Entity{
		EntityID:   e.GetEntityId(),
		Name:       e.GetName(),
		EntityType: e.GetEntityType(),
		Confidence: e.GetConfidence(),
		Snippet:    e.GetSnippet(),
		Relevance:  e.GetRelevance(),
		IsVendor:   e.GetIsVendor(),
	}
	if e.GetAttributes() != nil {
		m.Attributes = e.GetAttributes().AsMap()
	}
	if e.GetUpdatedAt() != nil {
		m.UpdatedAt = e.GetUpdatedAt().AsTime()
	}
	return m
}

func intMap(m map[string]int32) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

// IsNotFound reports whether err is a *NotFoundError.
func IsNotFound(err error) (*NotFoundError, bool) {
	var e *NotFoundError
	return e, errors.As(err, &e)
}

// IsAmbiguous reports whether err is an *AmbiguousError.
func IsAmbiguous(err error) (*AmbiguousError, bool) {
	var e *AmbiguousError
	return e, errors.As(err, &e)
}
