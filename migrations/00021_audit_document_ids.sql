-- The audit trail names the documents each read returned (docs/AUDIT.md):
-- a changed document gets new chunks and its old ones are deleted, so an
-- entry's chunk_ids stop naming anything after one edit, while the
-- document's external id stays. "Who read document X?" filters on it
-- (document_ids @> ARRAY[X]), which the GIN index answers without reading
-- the trail.
--
-- auth.audit_events belongs to the migration role (00016); bmcis_auth's
-- table-wide SELECT and INSERT cover the new column, and nothing else is
-- granted (migrations.NotOwned). The previous release's auth names the
-- columns it writes and reads, so it keeps working: its entries get the
-- default, no documents.

-- Outside a transaction, so that appends never wait on the index build: the
-- column comes with a constant default (no rewrite), and the index is built
-- concurrently (a trail kept 400 days is large, and the edges' buffers are
-- bounded). A build interrupted half-way leaves an invalid index, which a
-- second run drops and builds again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE auth.audit_events ADD COLUMN IF NOT EXISTS document_ids text[] NOT NULL DEFAULT '{}';
DROP INDEX CONCURRENTLY IF EXISTS auth.audit_events_document_ids;
CREATE INDEX CONCURRENTLY audit_events_document_ids ON auth.audit_events USING gin (document_ids);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS auth.audit_events_document_ids;
ALTER TABLE auth.audit_events DROP COLUMN IF EXISTS document_ids;
