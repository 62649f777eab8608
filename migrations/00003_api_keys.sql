-- API keys: only a SHA-256 of the secret is stored; the key id is the lookup
-- handle and the visible part of `bmcis_<keyid>_<secret>`.

-- +goose Up
CREATE TABLE api_keys (
    key_id       text        PRIMARY KEY,
    secret_hash  bytea       NOT NULL CHECK (octet_length(secret_hash) = 32),
    name         text        NOT NULL CHECK (name <> ''),
    owner        text        NOT NULL,
    limit_minute integer     CHECK (limit_minute > 0),
    limit_hour   integer     CHECK (limit_hour > 0),
    limit_day    integer     CHECK (limit_day > 0),
    rotated_from text        REFERENCES api_keys (key_id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_owner ON api_keys (owner);

-- +goose Down
DROP TABLE IF EXISTS api_keys;
