-- Scheduled sources (docs/SOURCES.md): a source is of a kind (folder, git,
-- web) with its settings, and the search service's runner syncs the
-- scheduled ones. settings holds the kind's keys as given; a credential
-- appears there only as a reference (env:NAME, file:/path), never itself.
-- cursor is the kind's state after the last successful run (a commit, page
-- validators); the lease columns let one replica at a time run a source.
-- Rows of `bmcisctl sync` stay kind folder without a schedule.

-- +goose Up
ALTER TABLE search.sources
    ADD COLUMN kind                 text        NOT NULL DEFAULT 'folder' CHECK (kind ~ '^[a-z][a-z0-9_]{0,31}$'),
    ADD COLUMN settings             jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object'),
    ADD COLUMN schedule_seconds     integer     NOT NULL DEFAULT 0 CHECK (schedule_seconds >= 0),
    ADD COLUMN cursor               jsonb,
    ADD COLUMN next_run_at          timestamptz,
    ADD COLUMN last_run_at          timestamptz,
    ADD COLUMN last_status          text        NOT NULL DEFAULT '' CHECK (last_status IN ('', 'ok', 'failed')),
    ADD COLUMN last_error           text        NOT NULL DEFAULT '',
    ADD COLUMN consecutive_failures integer     NOT NULL DEFAULT 0,
    ADD COLUMN lease_owner          text,
    ADD COLUMN lease_until          timestamptz;

-- The runner's question: which scheduled sources are due.
CREATE INDEX sources_due ON search.sources (next_run_at) WHERE schedule_seconds > 0;

-- +goose Down
DROP INDEX IF EXISTS search.sources_due;
ALTER TABLE search.sources
    DROP COLUMN IF EXISTS lease_until,
    DROP COLUMN IF EXISTS lease_owner,
    DROP COLUMN IF EXISTS consecutive_failures,
    DROP COLUMN IF EXISTS last_error,
    DROP COLUMN IF EXISTS last_status,
    DROP COLUMN IF EXISTS last_run_at,
    DROP COLUMN IF EXISTS next_run_at,
    DROP COLUMN IF EXISTS cursor,
    DROP COLUMN IF EXISTS schedule_seconds,
    DROP COLUMN IF EXISTS settings,
    DROP COLUMN IF EXISTS kind;
