-- chunk_terms is the distinct words of each chunk's text, folded as the
-- mention matcher folds them (platform/mentions.Terms: letters and digits,
-- lowercased), each as a 32-bit hash computed in Go, so the index and the
-- matcher never disagree on a word. A re-link after a graph import finds
-- the chunks that can hold a changed name through the GIN index
-- (terms @> the name's words) instead of reading every chunk.
-- The re-link fills the table itself, for the chunks written since it last
-- did (ids above mention_state.terms_through: chunk ids only grow, and no
-- writer is in flight while a re-link holds the mention lock), so
-- ingestion pays nothing for it: maintained at write time, the index made
-- writing chunks 3 to 4 times slower (docs/BENCHMARKS.md, "Mentions").
-- Rows go with their chunk (ON DELETE CASCADE).

-- +goose Up
CREATE TABLE chunk_terms (
    chunk_id bigint    PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    terms    integer[] NOT NULL
);
CREATE INDEX chunk_terms_terms ON chunk_terms USING gin (terms);
ALTER TABLE mention_state ADD COLUMN terms_through bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE mention_state DROP COLUMN IF EXISTS terms_through;
DROP TABLE IF EXISTS chunk_terms;
