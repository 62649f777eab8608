-- One owner per table: each service's tables move into a schema of its own
-- (search, vendorgraph, auth), owned by the service's group role, and each
-- service connects as a login role in that group: it reads, writes and
-- maintains its own tables (search drops and rebuilds its vector indexes
-- around bulk loads, VACUUMs and ANALYZEs them, which only an owner may)
-- and cannot reach another schema's. The migration role (whoever runs
-- `bmcisctl migrate`) owns the schemas and runs every migration, as a
-- member of each group; only search may create in its own schema (its
-- indexes), no service in another's or in public. The group
-- roles are NOLOGIN, so a deployment makes each service's own LOGIN role a
-- member (`bmcisctl migrate up` does, migrations.EnsureServiceLogin;
-- docs/DEPLOY.md, "Database roles"). The map: docs/DATA-OWNERSHIP.md.
--
-- A later migration that creates a table in a service's schema gives it
-- to the group (ALTER TABLE ... OWNER TO bmcis_search) and names the schema.
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
        -- The migration role acts as each owner (a superuser needs not).
        IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            EXECUTE format('GRANT %I TO %I', r, current_user);
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

-- Each service's group owns its tables (their indexes and serial sequences
-- follow) and its standalone sequences.
-- +goose StatementBegin
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname IN ('search', 'vendorgraph', 'auth') AND c.relkind IN ('r', 'p', 'S')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                               AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
    LOOP
        EXECUTE format('ALTER %s %I.%I OWNER TO %I',
            CASE r.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, r.nspname, r.relname, 'bmcis_' || r.nspname);
    END LOOP;
END $$;
-- +goose StatementEnd

-- Each service: its schema, every table and sequence in it, nothing else.
-- Tables a later migration adds are granted by the default privileges.
GRANT USAGE ON SCHEMA search TO bmcis_search;
-- CREATE INDEX needs CREATE on the schema: search rebuilds its vector
-- indexes itself (store.EmbedSession). The others create nothing.
GRANT CREATE ON SCHEMA search TO bmcis_search;
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

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I RESET search_path', current_database());
END $$;
-- +goose StatementEnd
REVOKE ALL ON public.goose_db_version FROM bmcis_search, bmcis_vendorgraph, bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA search REVOKE ALL ON TABLES FROM bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA search REVOKE ALL ON SEQUENCES FROM bmcis_search;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON TABLES FROM bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA vendorgraph REVOKE ALL ON SEQUENCES FROM bmcis_vendorgraph;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON TABLES FROM bmcis_auth;
ALTER DEFAULT PRIVILEGES IN SCHEMA auth REVOKE ALL ON SEQUENCES FROM bmcis_auth;

-- +goose StatementBegin
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname IN ('search', 'vendorgraph', 'auth') AND c.relkind IN ('r', 'p', 'S')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                               AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
    LOOP
        EXECUTE format('ALTER %s %I.%I OWNER TO %I',
            CASE r.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, r.nspname, r.relname, current_user);
    END LOOP;
END $$;
-- +goose StatementEnd
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
