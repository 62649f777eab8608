package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// MirrorRead is what a replica's vector mirror reads to catch up
// (MirrorChanges): all in one snapshot.
type MirrorRead struct {
	// Model is the active model's row (0: none) and Version the vectors
	// generation of the snapshot (FeedState.VectorsGeneration: it moves
	// whenever vectors are queued or applied, not when a merge moves them
	// from the queue to chunks).
	Model, Version int64
	// Generation is the feed generation read up to.
	Generation int64
	// Changed are the documents changed after since (each of their
	// chunks went to the read's callback) and Deleted those deleted after
	// it.
	Changed, Deleted []int64
	// Vectors counts the vectors of Model, stored and queued (a full read
	// only; a chunk in both places, which Apply prevents, counts twice).
	Vectors int64
}

// MirrorChunk is one chunk's stored vector.
type MirrorChunk struct {
	DocumentID, ChunkID int64
	// Vector is nil when the chunk has no vector of the model. It is the
	// receiver's to keep.
	Vector []float32
}

// MirrorQuery says what a mirror holds and asks for (MirrorChanges).
type MirrorQuery struct {
	// Model is the model the mirror holds (0: none) and Since the feed
	// generation it read up to (0: a full read).
	Model, Since int64
	// LastVersion is the vectors generation it read last; Pending the
	// chunks it read without a vector.
	LastVersion int64
	Pending     []int64
	// MaxVectors bounds a full read: more stored vectors than this, and
	// no chunk is read.
	MaxVectors int64
	// Counted, when set, is told that a read is a full one, of the
	// active model's vectors (how many), before its chunks arrive, so
	// the receiver can size itself.
	Counted func(model, vectors int64)
}

// MirrorChanges reads, in one repeatable-read snapshot, what changed since
// generation q.Since for a mirror of every vector of q.Model, stored in
// chunks.embedding or still queued (chunk_vector_queue; a merge moves a
// chunk's vector from one to the other, changing nothing here; a chunk in
// both takes its chunks.embedding vector): each chunk of the documents
// written since, with its vector when it has one of that model; the
// vectors the pending chunks (read before without one) have now (only
// when the vectors generation is not q.LastVersion: they gain vectors
// only as it moves); and the documents deleted since. When the active
// model is not q.Model, or q.Since is 0, it reads every chunk instead (a
// full read) unless the vectors number more than q.MaxVectors (then no
// chunk is read and Vectors says how many there are). Chunks go to each
// as they arrive, in no particular order, so a full read of a million
// vectors is never held at once.
func (s *Store) MirrorChanges(ctx context.Context, q MirrorQuery, each func(MirrorChunk) error) (MirrorRead, error) {
	var out MirrorRead
	since, pending := q.Since, q.Pending
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var gen, active int64
		var last time.Time
		if err := tx.QueryRow(ctx, stateQuery).Scan(&gen, &out.Version, &active, &last); err != nil {
			return err
		}
		out.Model, out.Generation = active, gen
		if active == 0 {
			return nil
		}
		if active != q.Model || since == 0 {
			since, pending = 0, nil
			if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM chunks WHERE embedding_model_id = $1 AND embedding IS NOT NULL)
				+ (SELECT count(*) FROM chunk_vector_queue WHERE model_id = $1)`, active).Scan(&out.Vectors); err != nil {
				return err
			}
			if out.Vectors > q.MaxVectors {
				return nil
			}
			if q.Counted != nil {
				q.Counted(active, out.Vectors)
			}
		}
		read := func(sql string, args ...any) error {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			var c MirrorChunk
			var v *pgvector.Vector
			_, err = pgx.ForEachRow(rows, []any{&c.DocumentID, &c.ChunkID, &v}, func() error {
				c.Vector = nil
				if v != nil {
					c.Vector = v.Slice()
				}
				v = nil // a new one per row: the receiver keeps the slice
				return each(c)
			})
			return err
		}
		if err := read(`SELECT c.document_id, c.id, coalesce(CASE WHEN c.embedding_model_id = $2 THEN c.embedding END, q.embedding)
			FROM chunks c JOIN documents d ON d.id = c.document_id
			LEFT JOIN chunk_vector_queue q ON q.chunk_id = c.id AND q.model_id = $2
			WHERE d.generation > $1`,
			since, active); err != nil {
			return err
		}
		if since == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT id FROM documents WHERE generation > $1`, since)
		if err != nil {
			return err
		}
		if out.Changed, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT document_id FROM document_tombstones WHERE generation > $1`, since)
		if err != nil {
			return err
		}
		if out.Deleted, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		if len(pending) > 0 && out.Version != q.LastVersion {
			return read(`SELECT document_id, id, embedding FROM chunks
				WHERE id = ANY($1) AND embedding_model_id = $2 AND embedding IS NOT NULL
				UNION ALL SELECT c.document_id, q.chunk_id, q.embedding FROM chunk_vector_queue q JOIN chunks c ON c.id = q.chunk_id
				WHERE q.chunk_id = ANY($1) AND q.model_id = $2`, pending, active)
		}
		return nil
	})
	if err != nil {
		return MirrorRead{}, fmt.Errorf("read vectors for the mirror: %w", err)
	}
	return out, nil
}
