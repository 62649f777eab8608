-- A chunk's access class (docs/ACCESS.md, "Cost"): chunks.access_key is its
-- access list as one string, platform/access.Key (principals joined by a
-- newline, which no principal holds), '' for everyone's. A caller's
-- replica knows which of its loaded classes the caller may read; when they
-- hold few chunks, the nearest-neighbour search scores exactly those rows,
-- read by an index-only scan of chunks_category_vectors, now keyed by
-- (category, access_key), instead of walking the HNSW graph past every row
-- the caller may not read.
--
-- Expand-only and cheap on a large table: the column is added with a
-- constant default (no rewrite); only restricted rows are backfilled; the
-- b-tree is rebuilt under the same name, and its leading column still
-- serves the previous release's category scans. A trigger keeps the key
-- equal to the list, whoever writes it.

-- +goose Up
ALTER TABLE search.chunks ADD COLUMN access_key text NOT NULL DEFAULT '';

-- +goose StatementBegin
CREATE FUNCTION search.chunks_access_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.access_key := coalesce(array_to_string(NEW.access, E'\n'), '');
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER chunks_access_key BEFORE INSERT OR UPDATE OF access ON search.chunks
    FOR EACH ROW EXECUTE FUNCTION search.chunks_access_key();

UPDATE search.chunks SET access = access WHERE access IS NOT NULL;

DROP INDEX IF EXISTS search.chunks_category_vectors;
CREATE INDEX chunks_category_vectors ON search.chunks (category, access_key) INCLUDE (id, embedding)
    WHERE embedding IS NOT NULL;

-- +goose Down
DROP INDEX IF EXISTS search.chunks_category_vectors;
CREATE INDEX chunks_category_vectors ON search.chunks (category) INCLUDE (id, embedding)
    WHERE embedding IS NOT NULL;
DROP TRIGGER IF EXISTS chunks_access_key ON search.chunks;
DROP FUNCTION IF EXISTS search.chunks_access_key();
ALTER TABLE search.chunks DROP COLUMN IF EXISTS access_key;
