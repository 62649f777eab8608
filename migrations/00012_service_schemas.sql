-- One owner per table: each service's tables move into a schema of its own
-- (search, vendorgraph, auth), and each service connects as a role that may
-- read and write that schema only. The migration role (whoever runs
-- `bmcisctl migrate`) keeps owning every object and alone runs DDL; the
-- service roles are NOLOGIN groups, so a deployment grants one to each
-- service's own LOGIN role (docs/DEPLOY.md, "Database roles";
-- migrations.EnsureServiceLogin). The ownership map: docs/DATA-OWNERSHIP.md.
--
-- Roles are cluster-wide while grants live in each database, so the roles
-- are created only when missing (several databases of one cluster, test
-- templates among them, share them) and never dropped on the way down.
-- Existing data stays: tables move with ALTER TABLE ... SET SCHEMA, their
-- indexes, constraints and serial sequences with them.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['bmcis_search', 'bmcis_vendorgraph', 'bmcis_auth'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- another database's migration created it meanwhile
            END;
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

CREATE SCHEMA search;
CREATE SCHEMA vendorgraph;
CREATE SCHEMA auth;

ALTER TABLE public.embedding_models            SET SCHEMA search;
ALTER TABLE public.documents                   SET SCHEMA search;
ALTER TABLE public.chunks                      SET SCHEMA search;
ALTER TABLE public.document_tombstones         SET SCHEMA search;
ALTER TABLE public.search_state                SET SCHEMA search;
ALTER TABLE public.sources                     SET SCHEMA search;
ALTER TABLE public.chunk_vector_queue          SET SCHEMA search;
ALTER TABLE public.search_index_snapshots      SET SCHEMA search;
ALTER TABLE public.search_index_snapshot_parts SET SCHEMA search;
ALTER TABLE public.entity_mentions             SET SCHEMA search;
ALTER TABLE public.mention_state               SET SCHEMA search;
ALTER TABLE public.chunk_terms                 SET SCHEMA search;
ALTER SEQUENCE public.search_generation        SET SCHEMA search;
ALTER SEQUENCE public.mention_graph_version    SET SCHEMA search;

ALTER TABLE public.entities                    SET SCHEMA vendorgraph;
ALTER TABLE public.vendor_aliases              SET SCHEMA vendorgraph;
ALTER TABLE public.relationships               SET SCHEMA vendorgraph;

ALTER TABLE public.api_keys                    SET SCHEMA auth;
ALTER TABLE public.rate_limit_tiers            SET SCHEMA auth;
ALTER TABLE public.api_key_limits              SET SCHEMA auth;

-- Sessions that do not set their own search_path (the migration role's:
-- bmcisctl, operators' psql) see every schema; each service's login role
-- sets its own schema (migrations.EnsureServiceLogin). Tables keep one name
-- across schemas, so an unqualified name means one table. A later
-- migration names the schema of every object it creates.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET search_path = search, vendorgraph, auth, public', current_database());
END $$;
-- +goose StatementEnd

-- Nobody but the migration role creates anything in public (PostgreSQL 15
-- already revokes it; older servers grant it to everyone).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- Each service: its schema, every table and sequence in it, nothing else.
-- Tables a later migration adds are granted by the default privileges.
GRANT USAGE ON SCHEMA search TO bmcis_search;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA search TO bmcis_search;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA search TO bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA search GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA search GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO bmcis_search;

GRANT USAGE ON SCHEMA vendorgraph TO bmcis_vendorgraph;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA vendorgraph TO bmcis_vendorgraph;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA vendorgraph TO bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO bmcis_vendorgraph;

GRANT USAGE ON SCHEMA auth TO bmcis_auth;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA auth TO bmcis_auth;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA auth TO bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO bmcis_auth;

-- A service refuses to start on a schema with pending migrations, which it
-- reads from goose's table.
GRANT SELECT ON public.goose_db_version TO bmcis_search, bmcis_vendorgraph, bmcis_auth;

-- Planner statistics after a large graph import: ANALYZE is the owner's
-- (the migration role's), so the service asks through this function.
CREATE FUNCTION vendorgraph.analyze_graph() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'ANALYZE vendorgraph.entities, vendorgraph.vendor_aliases, vendorgraph.relationships';
REVOKE ALL ON FUNCTION vendorgraph.analyze_graph() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION vendorgraph.analyze_graph() TO bmcis_vendorgraph;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I RESET search_path', current_database());
END $$;
-- +goose StatementEnd
DROP FUNCTION IF EXISTS vendorgraph.analyze_graph();
REVOKE ALL ON public.goose_db_version FROM bmcis_search, bmcis_vendorgraph, bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA search REVOKE ALL ON TABLES FROM bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA search REVOKE ALL ON SEQUENCES FROM bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON TABLES FROM bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON SEQUENCES FROM bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON TABLES FROM bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON SEQUENCES FROM bmcis_auth;

ALTER TABLE auth.api_key_limits              SET SCHEMA public;
ALTER TABLE auth.rate_limit_tiers            SET SCHEMA public;
ALTER TABLE auth.api_keys                    SET SCHEMA public;
ALTER TABLE vendorgraph.relationships        SET SCHEMA public;
ALTER TABLE vendorgraph.vendor_aliases       SET SCHEMA public;
ALTER TABLE vendorgraph.entities             SET SCHEMA public;
ALTER SEQUENCE search.mention_graph_version  SET SCHEMA public;
ALTER SEQUENCE search.search_generation      SET SCHEMA public;
ALTER TABLE search.chunk_terms               SET SCHEMA public;
ALTER TABLE search.mention_state             SET SCHEMA public;
ALTER TABLE search.entity_mentions           SET SCHEMA public;
ALTER TABLE search.search_index_snapshot_parts SET SCHEMA public;
ALTER TABLE search.search_index_snapshots    SET SCHEMA public;
ALTER TABLE search.chunk_vector_queue        SET SCHEMA public;
ALTER TABLE search.sources                   SET SCHEMA public;
ALTER TABLE search.search_state              SET SCHEMA public;
ALTER TABLE search.document_tombstones       SET SCHEMA public;
ALTER TABLE search.chunks                    SET SCHEMA public;
ALTER TABLE search.documents                 SET SCHEMA public;
ALTER TABLE search.embedding_models          SET SCHEMA public;
-- The moved tables' privileges go with them; the groups lose them here.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM bmcis_search, bmcis_vendorgraph, bmcis_auth;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM bmcis_search, bmcis_vendorgraph, bmcis_auth;
DROP SCHEMA auth;
DROP SCHEMA vendorgraph;
DROP SCHEMA search;
