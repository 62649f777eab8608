// Package store is the search service's PostgreSQL access: document writes
// (one transaction per document, content-hash idempotent), deletions with
// tombstones, the commit-ordered change feed replicas follow, nearest-
// neighbour queries on the pgvector HNSW index, and the embedding sweep's
// bulk vector writes.
//
// Every write that changes what a search can see takes a generation from
// the search_generation sequence under a transaction-scoped advisory lock
// (feedLockKey) as its last statement before COMMIT, so generations are
// handed out in commit order: a replica that has applied generation G has
// applied every change that committed before G. Commits then NOTIFY
// Channel.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bmcis/knowledge/platform/mentions"
)

// Channel is the LISTEN/NOTIFY channel every change is announced on.
const Channel = "bmcis_search"

// Advisory lock keys (pg_advisory_*). feedLockKey serializes the tail of
// every writing transaction so generations follow commit order; embedLockKey
// makes one process at a time train models and write embeddings;
// snapshotLockKey one replica at a time write an index snapshot.
const (
	feedLockKey     int64 = 0x626d636973_0001 // "bmcis" 1
	embedLockKey    int64 = 0x626d636973_0002 // "bmcis" 2
	snapshotLockKey int64 = 0x626d636973_0003 // "bmcis" 3
)

// VectorIndexName is the HNSW index on chunks.embedding;
// CategoryVectorsName the b-tree of the vectors of each category and
// access class (exact filtered scans, migrations 00009 and 00019). A bulk
// write drops and rebuilds both.
const (
	VectorIndexName     = "chunks_embedding_hnsw"
	CategoryVectorsName = "chunks_category_vectors"
)

// HNSW build parameters: pgvector's defaults, as in the first migration.
const (
	HNSWM              = 16
	HNSWEfConstruction = 64
)

// Store wraps the pool.
type Store struct {
	pool      *pgxpool.Pool
	linker    *mentions.Linker
	mentions  mentionCache
	graphKick chan struct{}
	reads     ReadCounts
}

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, linker: mentions.NewLinker(), graphKick: make(chan struct{}, 1)}
}

// Linker returns the store's mention linker (the matcher of the graph's
// names, rebuilt when the graph changes).
func (s *Store) Linker() *mentions.Linker { return s.linker }

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ErrNotFound is returned when a named document does not exist.
var ErrNotFound = errors.New("not found")

// EmbeddingColumnDims returns the declared dimension of chunks.embedding.
func (s *Store) EmbeddingColumnDims(ctx context.Context) (int, error) {
	var typmod int
	err := s.pool.QueryRow(ctx, `SELECT a.atttypmod FROM pg_attribute a
		WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding' AND NOT a.attisdropped`).Scan(&typmod)
	if err != nil {
		return 0, fmt.Errorf("read embedding column type: %w", err)
	}
	return typmod, nil
}

// Category is a category name with its document count.
type Category struct {
	Name      string
	Documents int
}

// Categories lists non-empty categories with their document counts.
func (s *Store) Categories(ctx context.Context) ([]Category, error) {
	rows, err := s.pool.Query(ctx, `SELECT category, count(*) FROM documents WHERE category <> '' GROUP BY category ORDER BY category`)
	if err != nil {
		return nil, fmt.Errorf("list categories: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Category, error) {
		var c Category
		err := r.Scan(&c.Name, &c.Documents)
		return c, err
	})
}

// Counts returns the number of stored documents and chunks.
func (s *Store) Counts(ctx context.Context) (docs, chunks int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)`).Scan(&docs, &chunks)
	if err != nil {
		err = fmt.Errorf("count documents: %w", err)
	}
	return docs, chunks, err
}

// withTimeout bounds one database operation.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// rollback ends a failed transaction on conn; a connection that cannot roll
// back is closed so the pool never reuses it mid-transaction.
func rollback(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// HasUnembedded reports whether any chunk still lacks a vector (served by
// the chunks_unembedded partial index).
func (s *Store) HasUnembedded(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chunks c WHERE embedding IS NULL
		AND NOT EXISTS (SELECT 1 FROM chunk_vector_queue q WHERE q.chunk_id = c.id))`).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for chunks without vectors: %w", err)
	}
	return ok, nil
}

// VectorIndexExists reports whether the vector indexes are there (a bulk
// write interrupted between dropping and rebuilding them leaves them missing).
func (s *Store) VectorIndexExists(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		VectorIndexName, CategoryVectorsName).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up vector index: %w", err)
	}
	return ok, nil
}
