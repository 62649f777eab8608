-- Named sources and page numbers.
-- sources: one row per folder mirrored by `bmcisctl sync` (or REST upload
-- target), with what its last sync did; documents.source names the source a
-- document belongs to ('' for plain ingestion), so a sync deletes only its
-- own documents. chunks.page is the 1-based page of a paged format (PDF),
-- 0 for formats without pages.

-- +goose Up
CREATE TABLE sources (
    name           text        PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    root           text        NOT NULL DEFAULT '',
    last_sync_at   timestamptz,
    last_written   integer     NOT NULL DEFAULT 0,
    last_unchanged integer     NOT NULL DEFAULT 0,
    last_failed    integer     NOT NULL DEFAULT 0,
    last_deleted   integer     NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE documents ADD COLUMN source text NOT NULL DEFAULT '';
CREATE INDEX documents_source ON documents (source) WHERE source <> '';

ALTER TABLE chunks ADD COLUMN page integer NOT NULL DEFAULT 0 CHECK (page >= 0);

-- +goose Down
ALTER TABLE chunks DROP COLUMN IF EXISTS page;
DROP INDEX IF EXISTS documents_source;
ALTER TABLE documents DROP COLUMN IF EXISTS source;
DROP TABLE IF EXISTS sources;
