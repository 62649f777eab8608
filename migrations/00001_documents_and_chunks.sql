-- Documents and their chunks: the search service's source of truth. The
-- in-memory BM25 index is rebuilt from these tables, so nothing here is
-- derived state except the embeddings, which `bmcisctl reindex` recomputes.

-- +goose Up
-- +goose ENVSUB ON
-- Extensions stay on a down migration: other schemas in the database may use them.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- One row per embedding model ever used; exactly one is active. A builtin model
-- is trained on the corpus, so its parameters live here, versioned.
CREATE TABLE embedding_models (
    id          bigserial   PRIMARY KEY,
    model_id    text        NOT NULL UNIQUE,
    provider    text        NOT NULL,
    dimensions  integer     NOT NULL CHECK (dimensions > 0),
    params      bytea,
    active      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX embedding_models_one_active ON embedding_models (active) WHERE active;

CREATE TABLE documents (
    id            bigserial   PRIMARY KEY,
    external_id   text        NOT NULL UNIQUE CHECK (external_id <> ''),
    source_file   text        NOT NULL,
    category      text        NOT NULL DEFAULT '',
    title         text        NOT NULL DEFAULT '',
    content_hash  bytea       NOT NULL,
    chunk_count   integer     NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    ingested_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_category ON documents (category);

-- category is copied from the document so a filtered nearest-neighbour query
-- stays a single-table HNSW scan (pgvector 0.8 iterative scans need that).
CREATE TABLE chunks (
    id                 bigserial   PRIMARY KEY,
    document_id        bigint      NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    category           text        NOT NULL DEFAULT '',
    chunk_index        integer     NOT NULL CHECK (chunk_index >= 0),
    total_chunks       integer     NOT NULL CHECK (total_chunks > 0),
    context_header     text        NOT NULL DEFAULT '',
    text               text        NOT NULL,
    token_count        integer     NOT NULL CHECK (token_count >= 0),
    content_hash       bytea       NOT NULL,
    embedding          vector(${BMCIS_EMBEDDING_DIMENSIONS:-256}),
    embedding_model_id bigint      REFERENCES embedding_models (id),
    UNIQUE (document_id, chunk_index)
);
CREATE INDEX chunks_category ON chunks (category);
-- m and ef_construction: pgvector's defaults; recall is tuned at query time
-- with hnsw.ef_search (see docs/SEARCH.md).
CREATE INDEX chunks_embedding_hnsw ON chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);

-- +goose ENVSUB OFF

-- +goose Down
DROP TABLE IF EXISTS chunks;
DROP TABLE IF EXISTS documents;
DROP TABLE IF EXISTS embedding_models;
