-- A read-only role for backups (`bmcisctl backup`, docs/BACKUP.md): it
-- reads every table and sequence of the service schemas, and the schema
-- version, and writes nothing. NOLOGIN like the services' groups: `bmcisctl
-- migrate up` makes the login in BMCIS_BACKUP_DATABASE_URL a member
-- (migrations.EnsureBackupLogin). Tables and sequences a later migration
-- adds are granted by the default privileges (the migration role creates
-- them, then gives them to their service's group).

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bmcis_backup') THEN
        BEGIN
            CREATE ROLE bmcis_backup NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- another database's migration created it meanwhile
        END;
    END IF;
END $$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA search, vendorgraph, auth TO bmcis_backup;
GRANT SELECT ON ALL TABLES IN SCHEMA search, vendorgraph, auth TO bmcis_backup;
GRANT SELECT ON ALL SEQUENCES IN SCHEMA search, vendorgraph, auth TO bmcis_backup;
ALTER DEFAULT PRIVILEGES IN SCHEMA search, vendorgraph, auth GRANT SELECT ON TABLES TO bmcis_backup;
ALTER DEFAULT PRIVILEGES IN SCHEMA search, vendorgraph, auth GRANT SELECT ON SEQUENCES TO bmcis_backup;
GRANT SELECT ON public.goose_db_version TO bmcis_backup;

-- +goose Down
REVOKE ALL ON public.goose_db_version FROM bmcis_backup;
ALTER DEFAULT PRIVILEGES IN SCHEMA search, vendorgraph, auth REVOKE ALL ON SEQUENCES FROM bmcis_backup;
ALTER DEFAULT PRIVILEGES IN SCHEMA search, vendorgraph, auth REVOKE ALL ON TABLES FROM bmcis_backup;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA search, vendorgraph, auth FROM bmcis_backup;
REVOKE ALL ON ALL TABLES IN SCHEMA search, vendorgraph, auth FROM bmcis_backup;
REVOKE ALL ON SCHEMA search, vendorgraph, auth FROM bmcis_backup;
