-- Rate-limit tiers as data: a key's own limits move from one column per tier
-- into one row per (key, tier). rate_limit_tiers names the tiers a key may
-- have a limit for; adding a tier (platform/ratelimit.Tiers) is one row here,
-- in a migration of its own:
--   INSERT INTO rate_limit_tiers (name) VALUES ('week');

-- +goose Up
CREATE TABLE rate_limit_tiers (
    name text PRIMARY KEY CHECK (name ~ '^[a-z]+$')
);
INSERT INTO rate_limit_tiers (name) VALUES ('minute'), ('hour'), ('day');

CREATE TABLE api_key_limits (
    key_id      text    NOT NULL REFERENCES api_keys (key_id) ON DELETE CASCADE,
    tier        text    NOT NULL REFERENCES rate_limit_tiers (name),
    limit_value integer NOT NULL CHECK (limit_value > 0),
    PRIMARY KEY (key_id, tier)
);
INSERT INTO api_key_limits (key_id, tier, limit_value)
    SELECT key_id, 'minute', limit_minute FROM api_keys WHERE limit_minute IS NOT NULL
    UNION ALL
    SELECT key_id, 'hour', limit_hour FROM api_keys WHERE limit_hour IS NOT NULL
    UNION ALL
    SELECT key_id, 'day', limit_day FROM api_keys WHERE limit_day IS NOT NULL;
ALTER TABLE api_keys DROP COLUMN limit_minute, DROP COLUMN limit_hour, DROP COLUMN limit_day;

-- +goose Down
ALTER TABLE api_keys
    ADD COLUMN limit_minute integer CHECK (limit_minute > 0),
    ADD COLUMN limit_hour   integer CHECK (limit_hour > 0),
    ADD COLUMN limit_day    integer CHECK (limit_day > 0);
UPDATE api_keys k SET
    limit_minute = (SELECT limit_value FROM api_key_limits l WHERE l.key_id = k.key_id AND l.tier = 'minute'),
    limit_hour   = (SELECT limit_value FROM api_key_limits l WHERE l.key_id = k.key_id AND l.tier = 'hour'),
    limit_day    = (SELECT limit_value FROM api_key_limits l WHERE l.key_id = k.key_id AND l.tier = 'day');
DROP TABLE IF EXISTS api_key_limits;
DROP TABLE IF EXISTS rate_limit_tiers;
