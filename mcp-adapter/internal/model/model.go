// Package model holds the adapter's view of backend data, decoupled from the
// generated protobuf types so the pure packages (projection, signals,
// render) can be tested without gRPC.
package model

import "time"

// ScoreMethod names the retrievers behind a score.
type ScoreMethod string

// Score methods, as reported in score_type and ranking.score_method.
const (
	ScoreHybrid ScoreMethod = "hybrid"
	ScoreBM25   ScoreMethod = "bm25"
	ScoreVector ScoreMethod = "vector"
)

// Chunk is one stored piece of a document.
type Chunk struct {
	ChunkID        int64
	DocumentID     string
	SourceFile     string
	SourceCategory string
	Title          string
	ContextHeader  string
	ChunkText      string
	ChunkIndex     int
	TotalChunks    int
	// ChunkTokenCount is the cl100k count of ChunkText computed at
	// ingestion; 0 when unknown.
	ChunkTokenCount int
	// Page is the 1-based page the chunk is on, for paged formats (PDF);
	// 0 otherwise.
	Page      int
	UpdatedAt time.Time
}

// Hit is a ranked search result.
type Hit struct {
	Chunk
	Rank            int
	HybridScore     float64
	SimilarityScore float64
	BM25Score       float64
	ScoreType       ScoreMethod
	MatchedTerms    []string
	// BM25Rank and VectorRank are 1-based ranks on each retriever, 0 when
	// that retriever did not return the chunk.
	BM25Rank        int
	VectorRank      int
	IsDuplicate     bool
	SimilarChunkIDs []int64
	// Mentions are the graph entities the chunk names, vendors first.
	Mentions []Mention
}

// Mention is a vendor-graph entity a text names.
type Mention struct {
	EntityID   string
	Name       string
	EntityType string
	IsVendor   bool
	Count      int
}

// SearchPage is one page of a ranked query.
type SearchPage struct {
	Hits           []Hit
	TotalAvailable int
	CacheHit       bool
	Mode           ScoreMethod
	QueryTerms     []string
	SearchTimeMS   float64
	DatabaseTimeMS float64
	// QueryVendors are the vendors the query itself names.
	QueryVendors []Mention
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
}
