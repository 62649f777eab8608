-- Least privilege for auth and vendorgraph: their roles hold only what
-- their SQL uses. 00012 gave each service's group the ownership of its
-- tables, so the auth and vendorgraph roles could DROP, TRUNCATE, ALTER
-- (disable triggers, add columns) and DELETE from every table of theirs,
-- and auth could rewrite any column of a key (its secret digest, scopes,
-- groups) although it only ever revokes, expires and stamps last use.
-- Neither needs an owner's rights: auth maintains nothing, and vendorgraph
-- only refreshes its statistics after a large import, which now goes
-- through vendorgraph.analyze_graph (SECURITY DEFINER, like
-- auth.prune_audit_events). So their tables move to the migration role,
-- like auth.audit_events, with exactly these grants:
--   auth:        api_keys         SELECT, INSERT, UPDATE (revoked_at, expires_at, last_used_at)
--                api_key_limits   SELECT, INSERT
--                rate_limit_tiers nothing (foreign key checks run as the table's owner)
--   vendorgraph: entities, relationships  SELECT, INSERT, UPDATE (the import's upserts)
--                vendor_aliases           SELECT, INSERT, DELETE (an import replaces a vendor's aliases)
-- Search keeps owning its tables: it drops and rebuilds its vector indexes
-- and VACUUMs them (docs/DATA-OWNERSHIP.md).
--
-- 00012's default privileges would give the two groups every DML right on
-- a table a later migration adds; they are dropped, so a later migration
-- grants what the service's SQL needs, by name (migrations/roles_test.go
-- fails on a table whose grants it does not list).
--
-- The previous release runs the same statements, except a plain ANALYZE of
-- the graph tables, which a non-owner's session skips with a warning.

-- +goose Up
ALTER TABLE auth.api_keys         OWNER TO CURRENT_USER;
ALTER TABLE auth.api_key_limits   OWNER TO CURRENT_USER;
ALTER TABLE auth.rate_limit_tiers OWNER TO CURRENT_USER;
-- Changing the owner hands the old owner's rights to the new one; revoke
-- anything left before granting.
REVOKE ALL ON auth.api_keys, auth.api_key_limits, auth.rate_limit_tiers FROM bmcis_auth;
GRANT SELECT, INSERT ON auth.api_keys TO bmcis_auth;
GRANT UPDATE (revoked_at, expires_at, last_used_at) ON auth.api_keys TO bmcis_auth;
GRANT SELECT, INSERT ON auth.api_key_limits TO bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON TABLES FROM bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON SEQUENCES FROM bmcis_auth;

ALTER TABLE vendorgraph.entities       OWNER TO CURRENT_USER;
ALTER TABLE vendorgraph.vendor_aliases OWNER TO CURRENT_USER;
ALTER TABLE vendorgraph.relationships  OWNER TO CURRENT_USER;
REVOKE ALL ON vendorgraph.entities, vendorgraph.vendor_aliases, vendorgraph.relationships FROM bmcis_vendorgraph;
GRANT SELECT, INSERT, UPDATE ON vendorgraph.entities, vendorgraph.relationships TO bmcis_vendorgraph;
GRANT SELECT, INSERT, DELETE ON vendorgraph.vendor_aliases TO bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON TABLES FROM bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON SEQUENCES FROM bmcis_vendorgraph;

-- +goose StatementBegin
CREATE FUNCTION vendorgraph.analyze_graph() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    ANALYZE vendorgraph.entities, vendorgraph.vendor_aliases, vendorgraph.relationships;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION vendorgraph.analyze_graph() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vendorgraph.analyze_graph() TO bmcis_vendorgraph;

-- +goose Down
DROP FUNCTION vendorgraph.analyze_graph();
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO bmcis_vendorgraph;
REVOKE ALL ON vendorgraph.entities, vendorgraph.vendor_aliases, vendorgraph.relationships FROM bmcis_vendorgraph;
ALTER TABLE vendorgraph.entities       OWNER TO bmcis_vendorgraph;
ALTER TABLE vendorgraph.vendor_aliases OWNER TO bmcis_vendorgraph;
ALTER TABLE vendorgraph.relationships  OWNER TO bmcis_vendorgraph;

ALTER DEFAULT PRIVILEGES IN SCHEMA auth GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO bmcis_auth;
REVOKE ALL ON auth.api_keys, auth.api_key_limits, auth.rate_limit_tiers FROM bmcis_auth;
ALTER TABLE auth.api_keys         OWNER TO bmcis_auth;
ALTER TABLE auth.api_key_limits   OWNER TO bmcis_auth;
ALTER TABLE auth.rate_limit_tiers OWNER TO bmcis_auth;
