-- The search service's change feed. Every replica keeps an in-memory keyword
-- index built from documents/chunks and follows changes through a single
-- commit-ordered counter: a document's generation is taken from
-- search_generation under a transaction-scoped advisory lock right before
-- commit, so a replica that has seen generation G has seen every change that
-- committed before it. Deletions leave a tombstone with their own generation.
-- search_state.vectors_generation moves whenever stored embeddings change
-- (a sweep, a reindex, a new active model), so replicas drop cached rankings.

-- +goose Up
CREATE SEQUENCE search_generation AS bigint;

ALTER TABLE documents ADD COLUMN generation bigint;
UPDATE documents SET generation = nextval('search_generation');
ALTER TABLE documents ALTER COLUMN generation SET DEFAULT nextval('search_generation');
ALTER TABLE documents ALTER COLUMN generation SET NOT NULL;
CREATE INDEX documents_generation ON documents (generation);

CREATE TABLE document_tombstones (
    document_id bigint      PRIMARY KEY,
    external_id text        NOT NULL,
    generation  bigint      NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_tombstones_generation ON document_tombstones (generation);

CREATE TABLE search_state (
    singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    vectors_generation bigint      NOT NULL DEFAULT 0,
    vectors_changed_at timestamptz
);
INSERT INTO search_state DEFAULT VALUES;

-- Chunks still waiting for an embedding: the embedding sweep reads these.
CREATE INDEX chunks_unembedded ON chunks (id) WHERE embedding IS NULL;

-- +goose Down
DROP INDEX IF EXISTS chunks_unembedded;
DROP TABLE IF EXISTS search_state;
DROP TABLE IF EXISTS document_tombstones;
DROP INDEX IF EXISTS documents_generation;
ALTER TABLE documents DROP COLUMN IF EXISTS generation;
DROP SEQUENCE IF EXISTS search_generation;
