-- search_index_snapshots holds serialized copies of a search replica's
-- in-memory index (BM25 postings and the chunk and document records,
-- without text: services/search/internal/snapshot), so a starting replica
-- reads one sequential stream and catches up on the change feed from the
-- snapshot's generation instead of analysing every chunk again. Replicas
-- are stateless pods, so the copy lives here, split into parts of a few
-- MB (bytea values stay far below the 1 GB limit and are read one at a
-- time). One replica at a time writes (a session advisory lock); a
-- snapshot counts only once completed_at is set, and older ones are
-- deleted when a newer one completes. format_version and fingerprint say
-- which code can read a snapshot: a replica whose analysis differs ignores
-- it and builds its index from the chunks.

-- +goose Up
CREATE TABLE search_index_snapshots (
    id             bigserial   PRIMARY KEY,
    format_version integer     NOT NULL,
    fingerprint    text        NOT NULL,
    generation     bigint      NOT NULL,
    last_change    timestamptz NOT NULL,
    documents      bigint      NOT NULL,
    chunks         bigint      NOT NULL,
    parts          integer     NOT NULL DEFAULT 0,
    bytes          bigint      NOT NULL DEFAULT 0,
    crc32c         bigint      NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    completed_at   timestamptz
);
CREATE INDEX search_index_snapshots_usable ON search_index_snapshots (format_version, fingerprint, generation DESC)
    WHERE completed_at IS NOT NULL;
CREATE TABLE search_index_snapshot_parts (
    snapshot_id bigint  NOT NULL REFERENCES search_index_snapshots (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    data        bytea   NOT NULL,
    PRIMARY KEY (snapshot_id, seq)
);
-- The parts are varint-packed already: TOAST compression would cost CPU on
-- both sides for little.
ALTER TABLE search_index_snapshot_parts ALTER COLUMN data SET STORAGE EXTERNAL;

-- +goose Down
DROP TABLE IF EXISTS search_index_snapshot_parts;
DROP TABLE IF EXISTS search_index_snapshots;
