-- Two things for vector search at scale.
--
-- 1. Vectors of new chunks wait here before they join the HNSW index.
--
-- pgvector inserts into an HNSW graph one row at a time (a few hundred rows
-- a second on two cores), which bounded incremental ingestion. An ingestion
-- stream now stores its vectors here (COPY, no graph work) and is answered;
-- nearest-neighbour queries score the queued rows exactly alongside the
-- HNSW scan, so a queued chunk is found like any other; a background merge
-- then moves queued vectors into chunks.embedding in small transactions.
-- A row is in exactly one of the two places in any snapshot (the merge
-- deletes and updates in one statement). The column is untyped so a change
-- of BMCIS_EMBEDDING_DIMENSIONS only has to empty the queue.
--
-- 2. A covering index of each category's vectors. A filter that selects
-- few chunks is answered by exact distances over its rows (engine's
-- exactScan): an index-only scan reads the category's vectors packed
-- together instead of its rows scattered over the wide chunks heap (text
-- inline), and instead of an HNSW iterative scan that must walk past every
-- row of other categories. Measured in docs/BENCHMARKS.md.

-- +goose Up
CREATE TABLE chunk_vector_queue (
    chunk_id  bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    category  text   NOT NULL,
    model_id  bigint NOT NULL REFERENCES embedding_models (id) ON DELETE CASCADE,
    embedding vector NOT NULL
);

CREATE INDEX chunks_category_vectors ON chunks (category) INCLUDE (id, embedding)
    WHERE embedding IS NOT NULL;

-- 3. The sweep counts vectors of another model than the active one without
-- reading every row (almost always none: a model switch rewrites them all).
CREATE INDEX chunks_embedding_model ON chunks (embedding_model_id) WHERE embedding IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS chunks_embedding_model;
DROP INDEX IF EXISTS chunks_category_vectors;
DROP TABLE IF EXISTS chunk_vector_queue;
