-- Document access lists and caller groups (docs/ACCESS.md).
--
-- documents.access is a document's effective access list, normalised by
-- platform/access (sorted principals: group:NAME, user:ID); NULL is
-- everyone's. access_from_source says it was the source's default when the
-- document was written, so a change of the default reaches it.
-- chunks.access and chunk_vector_queue.access copy it, as category is
-- copied: the filtered nearest-neighbour scan tests each row it walks
-- without a join. Changing a list rewrites these columns and the document's
-- generation only (replicas follow the feed); no vector is recomputed.
-- sources.default_access is what documents of a source get without a list
-- of their own (NULL: everyone).
-- auth.api_keys.groups are a key's caller groups (bare names).

-- +goose Up
ALTER TABLE search.documents
    ADD COLUMN access text[],
    ADD COLUMN access_from_source boolean NOT NULL DEFAULT false;
ALTER TABLE search.chunks ADD COLUMN access text[];
ALTER TABLE search.chunk_vector_queue ADD COLUMN access text[];
ALTER TABLE search.sources ADD COLUMN default_access text[];
ALTER TABLE auth.api_keys ADD COLUMN groups text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE auth.api_keys DROP COLUMN IF EXISTS groups;
ALTER TABLE search.sources DROP COLUMN IF EXISTS default_access;
ALTER TABLE search.chunk_vector_queue DROP COLUMN IF EXISTS access;
ALTER TABLE search.chunks DROP COLUMN IF EXISTS access;
ALTER TABLE search.documents DROP COLUMN IF EXISTS access_from_source, DROP COLUMN IF EXISTS access;
