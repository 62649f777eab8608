-- The vendor knowledge graph: entities (vendors among them), aliases and typed
-- relationships. Names are matched on a normalized form (lowercase, white space
-- and punctuation folded); pg_trgm indexes serve "did you mean".

-- +goose Up
CREATE TABLE entities (
    id              uuid        PRIMARY KEY,
    name            text        NOT NULL CHECK (name <> ''),
    normalized_name text        NOT NULL,
    entity_type     text        NOT NULL CHECK (entity_type <> ''),
    confidence      real        NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    snippet         text        CHECK (char_length(snippet) <= 200),
    attributes      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    is_vendor       boolean     NOT NULL DEFAULT false,
    record_hash     bytea       NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entities_normalized_name ON entities (normalized_name);
CREATE INDEX entities_vendor_name_trgm ON entities
    USING gin (normalized_name gin_trgm_ops) WHERE is_vendor;

CREATE TABLE vendor_aliases (
    entity_id        uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    alias            text NOT NULL CHECK (alias <> ''),
    normalized_alias text NOT NULL,
    PRIMARY KEY (entity_id, normalized_alias)
);
CREATE INDEX vendor_aliases_normalized ON vendor_aliases (normalized_alias);
CREATE INDEX vendor_aliases_trgm ON vendor_aliases USING gin (normalized_alias gin_trgm_ops);

CREATE TABLE relationships (
    id                uuid        PRIMARY KEY,
    source_id         uuid        NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    target_id         uuid        NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    relationship_type text        NOT NULL CHECK (relationship_type <> ''),
    confidence        real        NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    metadata          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    record_hash       bytea       NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX relationships_source ON relationships (source_id);
CREATE INDEX relationships_target ON relationships (target_id);

-- +goose Down
DROP TABLE IF EXISTS relationships;
DROP TABLE IF EXISTS vendor_aliases;
DROP TABLE IF EXISTS entities;
