package store

import "sync/atomic"

// ReadCounts counts the store's per-answer lookups: what a request's read
// mask (SearchRequest.read_mask) spares. Each call counts once, whether
// its answer came from a cache or from PostgreSQL.
type ReadCounts struct {
	// ChunkTexts counts ChunkTexts calls (text kept only in PostgreSQL).
	ChunkTexts atomic.Int64
	// ChunkMentions counts ChunkMentions calls.
	ChunkMentions atomic.Int64
	// QueryVendors counts QueryVendors calls.
	QueryVendors atomic.Int64
}

// Reads returns the store's lookup counters.
func (s *Store) Reads() *ReadCounts { return &s.reads }
