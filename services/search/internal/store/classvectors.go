package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Class is one category and access class of chunks (chunks.category,
// chunks.access_key).
type Class struct {
	Category, AccessKey string
}

// ClassRows are the stored vectors of one class, read in one snapshot.
type ClassRows struct {
	IDs     []int64
	Vectors [][]float32
}

// ClassVectorsRead is what ClassVectors read: each class's vectors, the
// active model and the vectors version of the same snapshot.
type ClassVectorsRead struct {
	Classes map[Class]*ClassRows
	Model   int64
	// At is when the read began.
	At time.Time
	// Generation is the vectors version (vectorsVersion).
	Generation int64
}

// vectorsVersion moves whenever a vector enters or leaves chunks.embedding
// or the queue through this release: a new vectors generation (a model's
// vectors applied or queued) or a queue merge. Both counters only grow, so
// their sum does too. Document writes and access changes are not in it:
// the replica drops what it holds when its feed brings them.
const vectorsVersion = `(vectors_generation + vectors_merged)`

// ClassVectors reads the vectors in chunks.embedding of the given classes
// (the queued ones stay in chunk_vector_queue, searched by QueuedSearch),
// through the index-only scan of chunks_category_vectors.
func (s *Store) ClassVectors(ctx context.Context, classes []Class) (ClassVectorsRead, error) {
	out := ClassVectorsRead{Classes: make(map[Class]*ClassRows, len(classes)), At: time.Now()}
	var cats, keys []string
	for _, c := range classes {
		out.Classes[c] = &ClassRows{}
		cats = append(cats, c.Category)
		keys = append(keys, c.AccessKey)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT id FROM embedding_models WHERE active), 0), `+vectorsVersion+`
			FROM search_state`).Scan(&out.Model, &out.Generation); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT category, access_key, id, embedding FROM chunks
			WHERE embedding IS NOT NULL AND category = ANY($1) AND access_key = ANY($2)`, cats, keys)
		if err != nil {
			return err
		}
		var c Class
		var id int64
		var v pgvector.Vector
		_, err = pgx.ForEachRow(rows, []any{&c.Category, &c.AccessKey, &id, &v}, func() error {
			if r := out.Classes[c]; r != nil {
				r.IDs = append(r.IDs, id)
				r.Vectors = append(r.Vectors, v.Slice())
			}
			return nil
		})
		return err
	})
	if err != nil {
		return ClassVectorsRead{}, fmt.Errorf("read class vectors: %w", err)
	}
	return out, nil
}

// QueuedSearch is VectorSearch over the queued vectors only (q's
// categories and access set filter them; Exact and Classes do not apply),
// with the vectors version (vectorsVersion) of the same snapshot. A caller
// holding the other vectors (the engine's class vectors) may add these to
// them only when the version is the one they were read at.
func (s *Store) QueuedSearch(ctx context.Context, q VectorQuery) ([]VectorHit, int64, error) {
	args := []any{pgvector.NewVector(q.Vector), q.K, q.Model}
	filter := ""
	if len(q.Categories) > 0 {
		args = append(args, q.Categories)
		filter += " AND category = ANY($" + strconv.Itoa(len(args)) + ")"
	}
	if q.Access != nil {
		args = append(args, q.Access)
		filter += " AND " + AccessAllows("access", "$"+strconv.Itoa(len(args)))
	}
	// Marker rows: -2 carries the version (as its distance: exact below
	// 2^53), -1 says q.Model is not the active model.
	rows, err := s.pool.Query(ctx, `SELECT -2::bigint, (SELECT `+vectorsVersion+` FROM search_state)::float8, NULL::vector
		UNION ALL SELECT -1, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM embedding_models WHERE active AND id = $3)
		UNION ALL (SELECT chunk_id, embedding <=> $1, embedding FROM chunk_vector_queue
			WHERE model_id = $3`+filter+` ORDER BY 2 LIMIT $2)`, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("queued vector search: %w", err)
	}
	var hits []VectorHit
	var gen int64
	changed := false
	var id int64
	var dist *float64
	var v *pgvector.Vector
	_, err = pgx.ForEachRow(rows, []any{&id, &dist, &v}, func() error {
		switch {
		case id == -2 && dist != nil:
			gen = int64(*dist)
		case id == -1:
			changed = true
		case dist != nil && v != nil:
			hits = append(hits, VectorHit{ChunkID: id, Cosine: 1 - *dist, Vector: v.Slice()})
		}
		v = nil
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("queued vector search: %w", err)
	}
	if changed {
		return nil, 0, ErrModelChanged
	}
	return hits, gen, nil
}
