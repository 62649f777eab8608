-- Mentions tie the vendor graph to the documents: which entity (by its name
-- or an alias) a chunk mentions, and how often. Rows go away with either end
-- (ON DELETE CASCADE), so every path that deletes a chunk or a document drops
-- its links. mention_state.graph_version moves (from a sequence, never
-- reused) whenever an import changes entity names, so a process holding a
-- matcher built from an older graph knows to rebuild it.
-- The re-link's candidate look-up: 00010_chunk_terms.sql (a words index
-- the re-link keeps itself; kept on write it slowed ingestion several
-- times, docs/BENCHMARKS.md "Mentions").

-- +goose Up
CREATE TABLE entity_mentions (
    entity_id     uuid    NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    chunk_id      bigint  NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    mention_count integer NOT NULL CHECK (mention_count > 0),
    PRIMARY KEY (entity_id, chunk_id)
);
CREATE INDEX entity_mentions_chunk ON entity_mentions (chunk_id);

CREATE SEQUENCE mention_graph_version AS bigint;
CREATE TABLE mention_state (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    graph_version bigint  NOT NULL
);
INSERT INTO mention_state (graph_version) VALUES (nextval('mention_graph_version'));

-- +goose Down
DROP TABLE IF EXISTS mention_state;
DROP SEQUENCE IF EXISTS mention_graph_version;
DROP TABLE IF EXISTS entity_mentions;
