package testfake

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// VendorGraph is the stand-in vendor graph service.
type VendorGraph struct {
	vendorgraphv1.UnimplementedVendorGraphServiceServer

	vendors map[string]*vendorData // by normalized name
	names   []string

	mu   sync.Mutex
	errs []error
}

type vendorData struct {
	name          string
	entities      []*vendorgraphv1.Entity
	relationships []*vendorgraphv1.Relationship
}

// Vendor names in the fake graph. "Acme" alone is ambiguous.
const (
	VendorBig    = "Acme Corporation" // 150 entities, 700 relationships
	VendorSmall  = "Globex"           // 8 entities, 10 relationships
	VendorAcmeLt = "Acme Ltd"
	VendorAcmeIn = "ACME Inc"
)

func normalize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// NewVendorGraph builds the fake graph.
func NewVendorGraph() *VendorGraph {
	g := &VendorGraph{vendors: map[string]*vendorData{}}
	types := []string{"PRODUCT", "PERSON", "ORG", "LOCATION", "EVENT"}
	rtypes := []string{"PRODUCES", "WORKS_FOR", "PARTNERS_WITH", "LOCATED_IN", "COMPETES_WITH"}
	build := func(name string, ne, nr int) {
		v := &vendorData{name: name}
		for i := 0; i < ne; i++ {
			v.entities = append(v.entities, &vendorgraphv1.Entity{
				EntityId:   fmt.Sprintf("%08x-0000-4000-8000-%012d", len(name)*7919+i, i),
				Name:       fmt.Sprintf("%s %s %d", name, strings.ToLower(types[i%len(types)]), i),
				EntityType: types[i%len(types)],
				Confidence: 0.99 - float64(i%40)/100,
				Snippet:    fmt.Sprintf("Entity %d related to %s, described for tests.", i, name),
				UpdatedAt:  timestamppb.New(Epoch.AddDate(0, 0, -i)),
				Relevance:  1 - float64(i)/float64(ne+1),
			})
		}
		for i := 0; i < nr; i++ {
			meta, _ := structpb.NewStruct(map[string]any{"since": fmt.Sprint(2010 + i%15), "primary": i%2 == 0})
			v.relationships = append(v.relationships, &vendorgraphv1.Relationship{
				RelationshipId:   fmt.Sprintf("%08x-1111-4000-8000-%012d", len(name)*104729+i, i),
				SourceId:         v.entities[i%ne].GetEntityId(),
				TargetId:         v.entities[(i*7+1)%ne].GetEntityId(),
				RelationshipType: rtypes[i%len(rtypes)],
				Confidence:       0.9 - float64(i%30)/100,
				Metadata:         meta,
				UpdatedAt:        timestamppb.New(Epoch.AddDate(0, 0, -i)),
			})
		}
		g.vendors[normalize(name)] = v
		g.names = append(g.names, name)
	}
	build(VendorBig, 150, 700)
	build(VendorSmall, 8, 10)
	build(VendorAcmeLt, 3, 2)
	build(VendorAcmeIn, 3, 2)
	sort.Strings(g.names)
	return g
}

// FailNext makes the next calls fail with errs, in order.
func (g *VendorGraph) FailNext(errs ...error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, errs...)
}

func (g *VendorGraph) next() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) > 0 {
		err := g.errs[0]
		g.errs = g.errs[1:]
		return err
	}
	return nil
}

// GetVendor returns a vendor's neighbourhood, capped.
func (g *VendorGraph) GetVendor(_ context.Context, req *vendorgraphv1.GetVendorRequest) (*vendorgraphv1.GetVendorResponse, error) {
	if err := g.next(); err != nil {
		return nil, err
	}
	n := normalize(req.GetName())
	if n == "" || !limits.VendorName.Allows(utf8.RuneCountInString(req.GetName())) {
		return nil, status.Errorf(codes.InvalidArgument, "name: must be %d..%d characters", limits.VendorName.Min, limits.VendorName.Max)
	}
	v, ok := g.vendors[n]
	if !ok {
		var matches []string
		for _, name := range g.names {
			if strings.HasPrefix(normalize(name), n) {
				matches = append(matches, name)
			}
		}
		if len(matches) > 1 {
			st, _ := status.New(codes.FailedPrecondition, "ambiguous vendor name").
				WithDetails(&vendorgraphv1.VendorAmbiguousDetail{Name: req.GetName(), Candidates: matches})
			return nil, st.Err()
		}
		st, _ := status.New(codes.NotFound, "vendor not found").
			WithDetails(&vendorgraphv1.VendorNotFoundDetail{Name: req.GetName(), Suggestions: g.suggest(n, 3)})
		return nil, st.Err()
	}
	maxE, maxR := int(req.GetMaxEntities()), int(req.GetMaxRelationships())
	if maxE == 0 {
		maxE = 5
	}
	if maxR == 0 {
		maxR = 5
	}
	include := req.IncludeRelationships == nil || req.GetIncludeRelationships()
	resp := &vendorgraphv1.GetVendorResponse{
		VendorName: v.name,
		VendorId:   "vendor-" + normalize(v.name),
		Statistics: &vendorgraphv1.VendorStatistics{
			EntityCount: int32(len(v.entities)), RelationshipCount: int32(len(v.relationships)),
			EntityTypeDistribution: map[string]int32{}, RelationshipTypeDistribution: map[string]int32{},
		},
		LastUpdated: timestamppb.New(Epoch),
	}
	for _, e := range v.entities {
		resp.Statistics.EntityTypeDistribution[e.GetEntityType()]++
	}
	for _, r := range v.relationships {
		resp.Statistics.RelationshipTypeDistribution[r.GetRelationshipType()]++
	}
	resp.TopEntities = v.entities[:min(5, len(v.entities))]
	resp.Entities = v.entities[:min(maxE, len(v.entities))]
	resp.EntitiesTruncated = len(v.entities) > maxE
	for _, e := range resp.Entities {
		resp.EntityIds = append(resp.EntityIds, e.GetEntityId())
	}
	if include {
		resp.Relationships = v.relationships[:min(maxR, len(v.relationships))]
		resp.RelationshipsTruncated = len(v.relationships) > maxR
		for _, r := range resp.Relationships {
			resp.RelationshipIds = append(resp.RelationshipIds, r.GetRelationshipId())
		}
	}
	return resp, nil
}

func (g *VendorGraph) suggest(n string, limit int) []string {
	var out []string
	for _, name := range g.names {
		nn := normalize(name)
		if len(n) >= 3 && (strings.Contains(nn, n[:3]) || strings.Contains(n, nn[:min(3, len(nn))])) {
			out = append(out, name)
		}
		if len(out) == limit {
			break
		}
	}
	return out
}

// SuggestVendors returns names sharing a prefix with text.
func (g *VendorGraph) SuggestVendors(_ context.Context, req *vendorgraphv1.SuggestVendorsRequest) (*vendorgraphv1.SuggestVendorsResponse, error) {
	if err := g.next(); err != nil {
		return nil, err
	}
	resp := &vendorgraphv1.SuggestVendorsResponse{}
	for _, name := range g.suggest(normalize(req.GetText()), int(max(req.GetLimit(), 1))) {
		resp.Suggestions = append(resp.Suggestions, &vendorgraphv1.VendorSuggestion{Name: name, VendorId: "vendor-" + normalize(name), Score: 0.5})
	}
	return resp, nil
}
