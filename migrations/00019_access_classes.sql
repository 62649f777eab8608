-- A chunk's access class (docs/ACCESS.md, "Cost"): chunks.access_key is its
-- access list as one string, platform/access.Key (principals joined by a
-- newline, which no principal holds), '' for everyone's. A caller's
-- replica knows which of its loaded classes the caller may read; when they
-- hold few chunks, the nearest-neighbour search scores exactly those rows,
-- read by an index-only scan of chunks_category_vectors, now keyed by
-- (category, access_key), or held by the replica.
-- search_state.vectors_merged counts queue merges into chunks.embedding,
-- which take no vectors generation (they change no result): a replica's
-- held vectors are used only while both counters are the ones they were
-- read at.
--
-- Outside a transaction, so no lock outlives its statement: the columns
-- come with constant defaults (no rewrite); only restricted rows are
-- backfilled; the b-tree is built concurrently beside the old one, then
-- takes its name, and its leading column still serves the previous
-- release's category scans. A trigger keeps the key equal to the list,
-- whoever writes it. Every step may run again after an interruption.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE search.chunks ADD COLUMN IF NOT EXISTS access_key text NOT NULL DEFAULT '';
ALTER TABLE search.search_state ADD COLUMN IF NOT EXISTS vectors_merged bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION search.chunks_access_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.access_key := coalesce(array_to_string(NEW.access, E'\n'), '');
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE OR REPLACE TRIGGER chunks_access_key BEFORE INSERT OR UPDATE OF access ON search.chunks
    FOR EACH ROW EXECUTE FUNCTION search.chunks_access_key();

UPDATE search.chunks SET access = access
    WHERE access IS NOT NULL AND access_key <> array_to_string(access, E'\n');

DROP INDEX IF EXISTS search.chunks_class_vectors_build;
CREATE INDEX CONCURRENTLY chunks_class_vectors_build ON search.chunks (category, access_key) INCLUDE (id, embedding)
    WHERE embedding IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search.chunks_category_vectors;
ALTER INDEX search.chunks_class_vectors_build RENAME TO chunks_category_vectors;

-- +goose Down
DROP INDEX IF EXISTS search.chunks_category_vectors;
CREATE INDEX chunks_category_vectors ON search.chunks (category) INCLUDE (id, embedding)
    WHERE embedding IS NOT NULL;
DROP TRIGGER IF EXISTS chunks_access_key ON search.chunks;
DROP FUNCTION IF EXISTS search.chunks_access_key();
ALTER TABLE search.search_state DROP COLUMN IF EXISTS vectors_merged;
ALTER TABLE search.chunks DROP COLUMN IF EXISTS access_key;
