-- chunks.terms is the distinct words of a chunk's text, folded as the
-- mention matcher folds them (platform/mentions.Terms: letters and digits,
-- lowercased), each as a 32-bit hash, computed by the writer in Go so the
-- index and the matcher can never disagree on a word. A re-link after a
-- graph import finds the chunks that can hold a changed name through the
-- GIN index (terms @> the name's words) instead of reading every chunk.
-- fastupdate (the pending list) keeps the per-chunk insert cheap; the list
-- is merged in bulk. NULL: not computed yet (rows older than this
-- migration); a re-link reads those chunks itself and fills them in, found
-- through the partial index, which costs a write nothing once terms is set.

-- +goose Up
ALTER TABLE chunks ADD COLUMN terms integer[];
CREATE INDEX chunks_terms ON chunks USING gin (terms) WITH (fastupdate = on);
CREATE INDEX chunks_terms_missing ON chunks (id) WHERE terms IS NULL;

-- +goose Down
DROP INDEX IF EXISTS chunks_terms_missing;
DROP INDEX IF EXISTS chunks_terms;
ALTER TABLE chunks DROP COLUMN IF EXISTS terms;
