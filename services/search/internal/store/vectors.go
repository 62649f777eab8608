package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// VectorHit is one nearest neighbour.
type VectorHit struct {
	ChunkID int64
	// Cosine is the cosine similarity, 1 - pgvector's cosine distance.
	Cosine float64
	// Vector is the stored embedding (when VectorQuery.WithVectors).
	Vector []float32
}

// VectorQuery configures a nearest-neighbour search.
type VectorQuery struct {
	Vector []float32
	K      int
	// Categories restricts the scan (stored names); empty means all.
	Categories []string
	// Access restricts the scan to chunks the caller's access set (sorted
	// principals, platform/access) may read; nil means all.
	Access []string
	// EfSearch is hnsw.ef_search (candidate list size of the graph walk).
	EfSearch int
	// MaxScanTuples bounds pgvector 0.8's iterative scan for filtered
	// queries (hnsw.max_scan_tuples).
	MaxScanTuples int
	// WithVectors returns each hit's stored embedding too (the heap tuple
	// is read anyway; it saves a second query for duplicate detection).
	WithVectors bool
	// Exact scores every row of the categories instead of walking the HNSW
	// graph: cheaper and exact when the filter selects few rows.
	Exact bool
	// Classes, with Exact and Access, are the access keys
	// (platform/access.Key of each list Access may read, "" for
	// everyone's) whose rows of the categories are scored: an index-only
	// scan of chunks_category_vectors finds them by (category,
	// access_key) without reading a row the caller may not. Access still
	// filters the queued vectors.
	Classes []string
	// Model is the embedding_models row that embedded Vector. When set,
	// the search fails with ErrModelChanged if another model is active in
	// the statement's snapshot: its vectors live in another space.
	Model int64
}

// ErrModelChanged: another embedding model became active than the one the
// caller embedded with. The caller's replica has not loaded it yet; it
// will within a poll, and the call can then be repeated.
var ErrModelChanged = errors.New("the active embedding model changed")

// VectorSearch returns the K nearest chunks by cosine distance, best first,
// ties by chunk id: through the HNSW index, plus exact distances over the
// vectors still queued for it (chunk_vector_queue), in one statement so
// both parts see one snapshot. Filtered queries either score the filter's
// rows exactly (Exact) or use pgvector 0.8 iterative index scans
// (hnsw.iterative_scan = relaxed_order), so a selective filter keeps
// walking the graph until K rows pass it (or MaxScanTuples were visited)
// instead of returning the few that happened to be among the first
// ef_search candidates; relaxed order is then re-sorted here. Settings are
// SET LOCAL: one transaction, one network round trip.
func (s *Store) VectorSearch(ctx context.Context, q VectorQuery) ([]VectorHit, error) {
	vec := pgvector.NewVector(q.Vector)
	b := &pgx.Batch{}
	b.Queue("BEGIN READ ONLY")
	b.Queue("SELECT set_config('hnsw.ef_search', $1, true)", strconv.Itoa(max(q.EfSearch, 1)))
	emb := "NULL::vector"
	if q.WithVectors {
		emb = "embedding::vector"
	}
	filter := ""
	args := []any{vec, q.K}
	if len(q.Categories) > 0 {
		args = append(args, q.Categories)
		filter = " AND category = ANY($" + strconv.Itoa(len(args)) + ")"
	}
	exactFilter := filter
	if q.Access != nil {
		// The filter is tested on each row the scan walks (iterative
		// scan), like the category: the K rows come back full.
		args = append(args, q.Access)
		filter += " AND " + AccessAllows("access", "$"+strconv.Itoa(len(args)))
		if q.Classes != nil {
			// The same rows, told by the index's own columns.
			args = append(args, q.Classes)
			exactFilter += " AND access_key = ANY($" + strconv.Itoa(len(args)) + ")"
		} else {
			exactFilter = filter
		}
	}
	filtered := filter != ""
	indexed := `SELECT id, embedding <=> $1 AS d, ` + emb + ` AS e FROM chunks WHERE embedding IS NOT NULL` + filter + `
		ORDER BY embedding <=> $1 LIMIT $2`
	switch {
	case q.Exact && len(q.Categories) > 0:
		// OFFSET 0 keeps the planner off the HNSW index: it reads the
		// rows of the categories (and classes) through
		// chunks_category_vectors and sorts them.
		indexed = `SELECT id, d, e FROM (SELECT id, embedding <=> $1 AS d, ` + emb + ` AS e FROM chunks
			WHERE embedding IS NOT NULL` + exactFilter + ` OFFSET 0) x ORDER BY d LIMIT $2`
	case filtered:
		b.Queue("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.max_scan_tuples', $1, true)",
			strconv.Itoa(max(q.MaxScanTuples, q.K)))
	}
	sql := `(` + indexed + `) UNION ALL (SELECT chunk_id, embedding <=> $1, ` + emb + ` FROM chunk_vector_queue
		WHERE model_id = (SELECT id FROM embedding_models WHERE active)` + filter + ` ORDER BY 2 LIMIT $2)`
	if q.Model != 0 {
		// A marker row (id -1, no distance) when q.Model is not the active
		// model, checked in the statement's snapshot, the vectors' own:
		// Apply switches both in one transaction.
		args = append(args, q.Model)
		sql += ` UNION ALL SELECT -1, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM embedding_models WHERE active AND id = $` +
			strconv.Itoa(len(args)) + `)`
	}
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	var hits []VectorHit
	changed := false
	nsets := 3
	if filtered && !(q.Exact && len(q.Categories) > 0) {
		nsets = 4
	}
	for i := 0; i < nsets-1 && err == nil; i++ {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			var id int64
			var dist *float64
			var v *pgvector.Vector
			_, err = pgx.ForEachRow(rows, []any{&id, &dist, &v}, func() error {
				if dist == nil && id == -1 {
					changed = true
				} else if dist != nil {
					h := VectorHit{ChunkID: id, Cosine: 1 - *dist}
					if v != nil {
						h.Vector = v.Slice()
					}
					hits = append(hits, h)
				}
				v = nil
				return nil
			})
		}
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(conn)
		return nil, fmt.Errorf("vector search: %w", err)
	}
	if changed {
		return nil, ErrModelChanged
	}
	return TopHits(hits, q.K), nil
}

// TopHits sorts hits best first, ties by chunk id, and keeps the best k
// distinct chunks: a chunk re-embedded by another model can briefly be in
// chunks and in the queue, and its best entry counts.
func TopHits(hits []VectorHit, k int) []VectorHit {
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Cosine != hits[j].Cosine {
			return hits[i].Cosine > hits[j].Cosine
		}
		return hits[i].ChunkID < hits[j].ChunkID
	})
	seen := make(map[int64]bool, len(hits))
	out := hits[:0]
	for _, h := range hits {
		if !seen[h.ChunkID] {
			seen[h.ChunkID] = true
			out = append(out, h)
		}
	}
	return out[:min(len(out), k)]
}

// Embeddings returns the stored vectors of the given chunks (chunks without
// one are left out).
func (s *Store) Embeddings(ctx context.Context, ids []int64) (map[int64][]float32, error) {
	out := make(map[int64][]float32, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, embedding::vector FROM chunks WHERE id = ANY($1) AND embedding IS NOT NULL
		UNION ALL SELECT chunk_id, embedding FROM chunk_vector_queue
		WHERE chunk_id = ANY($1) AND model_id = (SELECT id FROM embedding_models WHERE active)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read embeddings: %w", err)
	}
	var id int64
	var v pgvector.Vector
	_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error {
		out[id] = v.Slice()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embeddings: %w", err)
	}
	return out, nil
}

// ChunksByID reads chunks with their documents, for ids a replica has not
// loaded yet.
func (s *Store) ChunksByID(ctx context.Context, ids []int64) ([]Chunk, []Document, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.id, c.document_id, c.chunk_index, c.total_chunks, c.context_header, c.text, c.token_count, c.content_hash, c.page,
			d.external_id, d.source_file, d.category, d.title, d.updated_at, d.ingested_at, d.generation, d.access
		FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ANY($1)`, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("read chunks: %w", err)
	}
	var chunks []Chunk
	var docs []Document
	seen := map[int64]bool{}
	var c Chunk
	var d Document
	_, err = pgx.ForEachRow(rows, []any{&c.ChunkID, &c.DocumentID, &c.ChunkIndex, &c.TotalChunks, &c.ContextHeader, &c.ChunkText, &c.ChunkTokenCount, &c.Hash, &c.Page,
		&d.ExternalID, &d.SourceFile, &d.Category, &d.Title, &d.UpdatedAt, &d.IngestedAt, &d.Generation, &d.Access}, func() error {
		chunks = append(chunks, c)
		c.Hash = nil
		if !seen[c.DocumentID] {
			seen[c.DocumentID] = true
			d.ID = c.DocumentID
			docs = append(docs, d)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read chunks: %w", err)
	}
	return chunks, docs, nil
}

// Model is a row of embedding_models.
type Model struct {
	ID         int64
	ModelID    string
	Provider   string
	Dimensions int
	Params     []byte
	Active     bool
	CreatedAt  time.Time
}

// ActiveModel returns the active embedding model without its parameters
// (Params nil; ModelByID reads them), or nil when none is.
func (s *Store) ActiveModel(ctx context.Context) (*Model, error) {
	return activeModel(ctx, s.pool)
}

// activeModel is ActiveModel on q: the pool, or a session's connection.
func activeModel(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*Model, error) {
	var m Model
	err := q.QueryRow(ctx, `SELECT id, model_id, provider, dimensions, active, created_at FROM embedding_models WHERE active`).
		Scan(&m.ID, &m.ModelID, &m.Provider, &m.Dimensions, &m.Active, &m.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read active embedding model: %w", err)
	}
	return &m, nil
}

// ModelByID returns a model by row id, with its parameters (tens of MB
// for the builtin model). They are read on a connection closed after:
// pgx keeps a read buffer as large as the largest message until the
// connection reads again, and an idle pooled connection would hold one of
// the model's size for as long as it stays idle.
func (s *Store) ModelByID(ctx context.Context, id int64) (*Model, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("read embedding model: %w", err)
	}
	defer func() {
		// The pool destroys a closed connection on release (and counts it
		// against its maximum until then).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = pc.Conn().Close(cctx)
		pc.Release()
	}()
	var m Model
	err = pc.QueryRow(ctx, `SELECT id, model_id, provider, dimensions, params, active, created_at FROM embedding_models WHERE id = $1`, id).
		Scan(&m.ID, &m.ModelID, &m.Provider, &m.Dimensions, &m.Params, &m.Active, &m.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read embedding model: %w", err)
	}
	return &m, nil
}

// StoredText is a chunk's header and text as stored.
type StoredText struct {
	ContextHeader string
	ChunkText     string
}

// ChunkTexts reads the header and text of chunks by id (ids that no longer
// exist are left out): what a replica keeping text only in PostgreSQL
// reads for the page it shows.
func (s *Store) ChunkTexts(ctx context.Context, ids []int64) (map[int64]StoredText, error) {
	s.reads.ChunkTexts.Add(1)
	out := make(map[int64]StoredText, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, context_header, text FROM chunks WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read chunk text: %w", err)
	}
	var id int64
	var t StoredText
	_, err = pgx.ForEachRow(rows, []any{&id, &t.ContextHeader, &t.ChunkText}, func() error {
		out[id] = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chunk text: %w", err)
	}
	return out, nil
}
