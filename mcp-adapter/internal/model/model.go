// Package model holds the adapter's view of the vendor graph, and the names
// of score methods. A chunk and a search result need no view of their own:
// the adapter reads the search service's records as they come
// (searchv1.Chunk, searchv1.SearchResult, searchv1.SearchResponse), whose
// field names are the reference's.
package model

import (
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// ScoreMethod names the retrievers behind a score.
type ScoreMethod string

// Score methods, as reported in score_type and ranking.score_method.
const (
	ScoreHybrid ScoreMethod = "hybrid"
	ScoreBM25   ScoreMethod = "bm25"
	ScoreVector ScoreMethod = "vector"
)

// Method names the retrievers of a retrieval mode (hybrid when unspecified).
func Method(m searchv1.RetrievalMode) ScoreMethod {
	switch m {
	case searchv1.RetrievalMode_RETRIEVAL_MODE_BM25:
		return ScoreBM25
	case searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR:
		return ScoreVector
	}
	return ScoreHybrid
}

// Entity is a node of the vendor graph.
type Entity struct {
	EntityID   string
	Name       string
	EntityType string
	Confidence float64
	Snippet    string
	Attributes map[string]any
	UpdatedAt  time.Time
	Relevance  float64
	IsVendor   bool
}

// Relationship is an edge of the vendor graph.
type Relationship struct {
	RelationshipID   string
	SourceID         string
	TargetID         string
	RelationshipType string
	Confidence       float64
	Metadata         map[string]any
	UpdatedAt        time.Time
	// SourceName and TargetName name the ends.
	SourceName, TargetName string
}

// EvidenceChunk is a chunk that mentions a vendor.
type EvidenceChunk struct {
	ChunkID      int64
	DocumentID   string // the document's external id
	SourceFile   string
	MentionCount int
	Snippet      string
}

// EvidenceDocument is a document that mentions a vendor.
type EvidenceDocument struct {
	DocumentID   string
	SourceFile   string
	MentionCount int
	ChunkCount   int
}

// VendorStatistics counts a vendor's whole neighbourhood.
type VendorStatistics struct {
	EntityCount                  int
	RelationshipCount            int
	EntityTypeDistribution       map[string]int
	RelationshipTypeDistribution map[string]int
}

// Vendor is a vendor's neighbourhood as returned by the vendor graph.
type Vendor struct {
	VendorName             string
	VendorID               string
	EntityIDs              []string
	RelationshipIDs        []string
	Statistics             VendorStatistics
	TopEntities            []Entity
	Entities               []Entity
	Relationships          []Relationship
	LastUpdated            time.Time
	EntitiesTruncated      bool
	RelationshipsTruncated bool
	CacheHit               bool
	Aliases                []string
	// Evidence: the chunks that mention the vendor, best first; the
	// documents that mention it most; how many chunks mention it in all.
	Evidence           []EvidenceChunk
	EvidenceDocuments  []EvidenceDocument
	EvidenceChunkCount int
	// EvidenceUnavailable: search did not answer, so the evidence is empty.
	EvidenceUnavailable bool
}
