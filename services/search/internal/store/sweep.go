package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
)

// EmbedSession is a connection holding the embedding advisory lock: only
// one process at a time trains, registers models or writes embeddings.
// Staged vectors live in a temporary table of this session.
type EmbedSession struct {
	conn *pgxpool.Conn
	dims int
}

// LockEmbedding takes the embedding lock, waiting for it when wait is true.
// It returns nil (and no error) when wait is false and another process holds it.
func (s *Store) LockEmbedding(ctx context.Context, wait bool) (*EmbedSession, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("embedding lock: %w", err)
	}
	if wait {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", embedLockKey)
	} else {
		var ok bool
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", embedLockKey).Scan(&ok)
		if err == nil && !ok {
			conn.Release()
			return nil, nil
		}
	}
	if err != nil {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("embedding lock: %w", err)
	}
	return &EmbedSession{conn: conn}, nil
}

// Close drops the staging table and releases the lock; a connection that
// cannot say so is closed, which releases the lock too.
func (e *EmbedSession) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if e.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = e.conn.Exec(ctx, "ROLLBACK")
	}
	if _, err := e.conn.Exec(ctx, "DROP TABLE IF EXISTS pg_temp.embedding_stage; SELECT pg_advisory_unlock_all()"); err != nil {
		_ = e.conn.Conn().Close(ctx)
	}
	e.conn.Release()
}

// needsVector is the condition on chunks c for a chunk that needs a vector
// of model $1 (every chunk when $2): none stored, or another model's, and
// none of that model queued.
const needsVector = `($2 OR ((c.embedding IS NULL OR c.embedding_model_id IS DISTINCT FROM $1)
	AND NOT EXISTS (SELECT 1 FROM chunk_vector_queue q WHERE q.chunk_id = c.id AND q.model_id = $1)))`

// Pending counts chunks whose embedding is missing or from another model
// than modelRow (all chunks when all is true), and all chunks.
// Without all, the count is read from indexes (chunks_unembedded,
// chunks_embedding_model, the primary key) instead of every row.
func (e *EmbedSession) Pending(ctx context.Context, modelRow int64, all bool) (pending, total int64, err error) {
	if all {
		err = e.conn.QueryRow(ctx, `SELECT count(*), count(*) FROM chunks`).Scan(&pending, &total)
	} else {
		err = e.conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM chunks c WHERE c.embedding IS NULL
				AND NOT EXISTS (SELECT 1 FROM chunk_vector_queue q WHERE q.chunk_id = c.id AND q.model_id = $1))
			+ (SELECT count(*) FROM chunks WHERE embedding IS NOT NULL
				AND (embedding_model_id IS NULL OR embedding_model_id < $1 OR embedding_model_id > $1)),
			(SELECT count(*) FROM chunks)`, modelRow).Scan(&pending, &total)
	}
	if err != nil {
		err = fmt.Errorf("count chunks to embed: %w", err)
	}
	return pending, total, err
}

// ChunkText is a chunk's id and indexed text (context header + text).
type ChunkText struct {
	ID   int64
	Text string
}

// PendingTexts returns up to limit chunks after afterID, in id order, that
// need an embedding from modelRow (every chunk when all is true).
func (e *EmbedSession) PendingTexts(ctx context.Context, modelRow int64, all bool, afterID int64, limit int) ([]ChunkText, error) {
	q := `SELECT id, context_header, text FROM chunks c WHERE id > $3 AND ` + needsVector + ` ORDER BY id LIMIT $4`
	if !all {
		// The two ways of needing a vector, each through its own index, so
		// a few new chunks among millions are found without a full scan.
		q = `SELECT id, context_header, text FROM (
			(SELECT id, context_header, text FROM chunks c WHERE id > $3 AND embedding IS NULL AND NOT $2
				AND NOT EXISTS (SELECT 1 FROM chunk_vector_queue q WHERE q.chunk_id = c.id AND q.model_id = $1)
				ORDER BY id LIMIT $4)
			UNION ALL
			(SELECT id, context_header, text FROM chunks WHERE id > $3 AND embedding IS NOT NULL
				AND (embedding_model_id IS NULL OR embedding_model_id < $1 OR embedding_model_id > $1)
				ORDER BY id LIMIT $4)) x ORDER BY id LIMIT $4`
	}
	rows, err := e.conn.Query(ctx, q, modelRow, all, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("read chunks to embed: %w", err)
	}
	var out []ChunkText
	var id int64
	var hdr, txt string
	_, err = pgx.ForEachRow(rows, []any{&id, &hdr, &txt}, func() error {
		out = append(out, ChunkText{ID: id, Text: analysis.IndexedText(hdr, txt)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chunks to embed: %w", err)
	}
	return out, nil
}

// StartStage creates (or empties) the session's staging table for vectors
// of dims dimensions.
func (e *EmbedSession) StartStage(ctx context.Context, dims int) error {
	e.dims = dims
	_, err := e.conn.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS pg_temp.embedding_stage;
		CREATE TEMP TABLE embedding_stage (id bigint PRIMARY KEY, embedding vector(%d) NOT NULL)`, dims))
	if err != nil {
		return fmt.Errorf("create staging table: %w", err)
	}
	return nil
}

// Stage copies vectors into the staging table.
func (e *EmbedSession) Stage(ctx context.Context, ids []int64, vecs [][]float32) error {
	_, err := e.conn.CopyFrom(ctx, pgx.Identifier{"pg_temp", "embedding_stage"}, []string{"id", "embedding"},
		pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
			return []any{ids[i], pgvector.NewVector(vecs[i])}, nil
		}))
	if err != nil {
		return fmt.Errorf("stage embeddings: %w", err)
	}
	return nil
}

// Model registration for Apply.
type NewModel struct {
	ModelID    string
	Provider   string
	Dimensions int
	Params     []byte
}

// Apply writes the staged vectors into chunks in one transaction, makes
// modelRow the active model, moves the vectors generation and announces
// it. Readers see either every old vector or every new one.
func (e *EmbedSession) Apply(ctx context.Context, modelRow int64) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE chunks c SET embedding = s.embedding, embedding_model_id = $1
			FROM pg_temp.embedding_stage s WHERE c.id = s.id`, modelRow)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		// Queued vectors of other models are stale now, and so are those
		// of the chunks just written (the same model applied again): a
		// chunk's vector is in one of the two places, never both.
		if _, err := tx.Exec(ctx, `DELETE FROM chunk_vector_queue q WHERE q.model_id <> $1
			OR q.chunk_id IN (SELECT id FROM pg_temp.embedding_stage)`, modelRow); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = false WHERE active AND id <> $1`, modelRow); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = true WHERE id = $1 AND NOT active`, modelRow); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE search_state SET vectors_generation = nextval('search_generation'), vectors_changed_at = now()`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "TRUNCATE pg_temp.embedding_stage; SELECT pg_notify('"+Channel+"', 'v')")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("apply embeddings: %w", err)
	}
	return n, nil
}

// RegisterModel inserts a model row (inactive), or returns the existing
// row of the same model id (remote providers re-register the same id).
func (e *EmbedSession) RegisterModel(ctx context.Context, m NewModel) (int64, error) {
	var id int64
	err := e.conn.QueryRow(ctx, `INSERT INTO embedding_models (model_id, provider, dimensions, params) VALUES ($1, $2, $3, $4)
		ON CONFLICT (model_id) DO UPDATE SET params = EXCLUDED.params, dimensions = EXCLUDED.dimensions
		RETURNING id`, m.ModelID, m.Provider, m.Dimensions, m.Params).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("register embedding model: %w", err)
	}
	return id, nil
}

// ActiveModel is Store.ActiveModel on the locked session.
func (e *EmbedSession) ActiveModel(ctx context.Context) (*Model, error) {
	return activeModel(ctx, e.conn)
}

// DropVectorIndex drops the HNSW index before a bulk write: pgvector
// inserts into an HNSW graph one at a time (a few hundred a second here),
// while building it over the loaded table is an order of magnitude faster.
// Until it is rebuilt, nearest-neighbour queries are exact sequential scans.
// The class vectors' b-tree goes too: built over the loaded table it is
// compact, where a million updates would split its pages as they come.
func (e *EmbedSession) DropVectorIndex(ctx context.Context) error {
	if _, err := e.conn.Exec(ctx, "DROP INDEX IF EXISTS "+VectorIndexName+"; DROP INDEX IF EXISTS "+CategoryVectorsName); err != nil {
		return fmt.Errorf("drop vector index: %w", err)
	}
	return nil
}

// EnsureVectorIndex (re)builds the vector indexes when one is missing.
func (e *EmbedSession) EnsureVectorIndex(ctx context.Context, maintenanceMem string) (bool, error) {
	// The class vectors' b-tree counts as missing while it lacks
	// access_key: the previous release's writer rebuilds it by its own
	// definition after a bulk load during a rolling upgrade.
	var exists, stale bool
	if err := e.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL,
		to_regclass($2) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a
			ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) AND a.attname = 'access_key'
			WHERE i.indexrelid = to_regclass($2))`,
		VectorIndexName, CategoryVectorsName).Scan(&exists, &stale); err != nil {
		return false, fmt.Errorf("look up vector index: %w", err)
	}
	if exists && !stale {
		return false, nil
	}
	if stale {
		if _, err := e.conn.Exec(ctx, "DROP INDEX IF EXISTS "+CategoryVectorsName); err != nil {
			return false, fmt.Errorf("drop outdated class vectors index: %w", err)
		}
	}
	if maintenanceMem != "" {
		if _, err := e.conn.Exec(ctx, "SELECT set_config('maintenance_work_mem', $1, false)", maintenanceMem); err != nil {
			return false, fmt.Errorf("set maintenance_work_mem: %w", err)
		}
	}
	_, err := e.conn.Exec(ctx, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON chunks
		USING hnsw (embedding vector_cosine_ops) WITH (m = %d, ef_construction = %d)`, VectorIndexName, HNSWM, HNSWEfConstruction))
	if err == nil {
		// As in migration 00019.
		_, err = e.conn.Exec(ctx, `CREATE INDEX IF NOT EXISTS `+CategoryVectorsName+` ON chunks (category, access_key)
			INCLUDE (id, embedding) WHERE embedding IS NOT NULL`)
	}
	if maintenanceMem != "" {
		_, _ = e.conn.Exec(context.Background(), "RESET maintenance_work_mem")
	}
	if err != nil {
		return false, fmt.Errorf("build vector index: %w", err)
	}
	// A bulk load leaves the planner's statistics stale until autovacuum
	// gets round to it; measured: hybrid P50 80 ms before ANALYZE, 6 ms after.
	// VACUUM also marks the pages all-visible, so exact category scans read
	// chunks_category_vectors alone (index-only) from the start.
	if _, err := e.conn.Exec(ctx, "VACUUM (ANALYZE) chunks"); err != nil {
		return true, fmt.Errorf("analyze chunks: %w", err)
	}
	return true, nil
}

// ResizeEmbeddings changes chunks.embedding to dims dimensions, dropping
// every stored vector and deactivating every model (they no longer fit).
func (e *EmbedSession) ResizeEmbeddings(ctx context.Context, dims int) error {
	return pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
		stmts := []string{
			"DROP INDEX IF EXISTS " + VectorIndexName,
			"DELETE FROM chunk_vector_queue",
			fmt.Sprintf("ALTER TABLE chunks ALTER COLUMN embedding TYPE vector(%d) USING NULL", dims),
			"UPDATE chunks SET embedding_model_id = NULL",
			"UPDATE embedding_models SET active = false WHERE active",
			"UPDATE search_state SET vectors_generation = nextval('search_generation'), vectors_changed_at = now()",
			"SELECT pg_notify('" + Channel + "', 'v')",
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("resize embeddings: %w", err)
			}
		}
		return nil
	})
}

// AllTexts streams the indexed text of every chunk with its document's
// external id and its position in it, for training.
func (e *EmbedSession) AllTexts(ctx context.Context, fn func(doc string, index int, text string)) error {
	rows, err := e.conn.Query(ctx, `SELECT d.external_id, c.chunk_index, c.context_header, c.text
		FROM chunks c JOIN documents d ON d.id = c.document_id`)
	if err != nil {
		return fmt.Errorf("read chunks for training: %w", err)
	}
	var doc, hdr, txt string
	var index int
	_, err = pgx.ForEachRow(rows, []any{&doc, &index, &hdr, &txt}, func() error {
		fn(doc, index, analysis.IndexedText(hdr, txt))
		return nil
	})
	if err != nil {
		return fmt.Errorf("read chunks for training: %w", err)
	}
	return nil
}

// Enqueue moves the staged vectors of modelRow into chunk_vector_queue in
// one transaction and announces them: searchable at once (vector queries
// score the queue exactly), with no HNSW work. Chunks deleted meanwhile
// are skipped (FOR KEY SHARE does not return rows deleted under it).
func (e *EmbedSession) Enqueue(ctx context.Context, modelRow int64) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
		// FOR SHARE, not KEY SHARE: an access-list change (SetAccess)
		// updating these chunks waits for this copy, then rewrites the
		// queued rows' access too, so a queued vector never keeps an old list.
		tag, err := tx.Exec(ctx, `INSERT INTO chunk_vector_queue (chunk_id, category, access, model_id, embedding)
			SELECT c.id, c.category, c.access, $1, s.embedding FROM pg_temp.embedding_stage s JOIN chunks c ON c.id = s.id
			FOR SHARE OF c
			ON CONFLICT (chunk_id) DO UPDATE SET category = EXCLUDED.category, access = EXCLUDED.access, model_id = EXCLUDED.model_id, embedding = EXCLUDED.embedding`, modelRow)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `TRUNCATE pg_temp.embedding_stage;
			UPDATE search_state SET vectors_generation = nextval('search_generation'), vectors_changed_at = now();
			SELECT pg_notify('`+Channel+`', 'v')`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue embeddings: %w", err)
	}
	return n, nil
}

// MergeQueued moves up to limit queued vectors of the active model into
// chunks.embedding (and so into the HNSW index) in one statement, so each
// chunk is in the queue or in chunks in every snapshot. Concurrent merges,
// from this or other replicas, take disjoint rows (SKIP LOCKED). It
// returns how many rows moved. A merge that moved any counts itself in
// search_state.vectors_merged, not in vectors_generation (it changes no
// result, so replicas keep their caches): what a replica holds of
// chunks.embedding (the engine's class vectors) is then known stale.
func (s *Store) MergeQueued(ctx context.Context, limit int) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH moved AS (
			DELETE FROM chunk_vector_queue q WHERE q.chunk_id IN (
				SELECT chunk_id FROM chunk_vector_queue
				WHERE model_id = (SELECT id FROM embedding_models WHERE active)
				ORDER BY chunk_id LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING q.chunk_id, q.model_id, q.embedding)
		UPDATE chunks c SET embedding = m.embedding, embedding_model_id = m.model_id FROM moved m WHERE c.id = m.chunk_id`, limit)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `UPDATE search_state SET vectors_merged = vectors_merged + 1`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("merge queued embeddings: %w", err)
	}
	return n, nil
}

// QueuedVectors counts the vectors waiting for the HNSW index.
func (s *Store) QueuedVectors(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM chunk_vector_queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued embeddings: %w", err)
	}
	return n, nil
}
