-- Mentions tie the vendor graph to the documents: which entity (by its name
-- or an alias) a chunk mentions, and how often. Rows go away with either end
-- (ON DELETE CASCADE), so every path that deletes a chunk or a document drops
-- its links. mention_state.graph_version moves (from a sequence, never
-- reused) whenever an import changes entity names, so a process holding a
-- matcher built from an older graph knows to rebuild it.
-- chunks_words serves "which chunks contain these words", the candidate
-- lookup that re-links only the chunks a changed name can appear in.

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

-- The same folding as platform/mentions.Normalize (letters and digits kept,
-- everything else a word break), so a name's words are the index's words.
CREATE INDEX chunks_words ON chunks
    USING gin (to_tsvector('simple', regexp_replace(lower(text), '[^[:alnum:]]+', ' ', 'g')));

-- +goose Down
DROP INDEX IF EXISTS chunks_words;
DROP TABLE IF EXISTS mention_state;
DROP SEQUENCE IF EXISTS mention_graph_version;
DROP TABLE IF EXISTS entity_mentions;
