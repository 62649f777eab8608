-- The audit trail (docs/AUDIT.md): one row per read the edges served (a
-- tool call, a resource read, a REST read), written only by the auth
-- service (AuditService.Append) and read by operators (AuditService.List).
--
-- Append-only for the services: unlike every other table of a service's
-- schema, this one belongs to the migration role (the schema's owner), not
-- to bmcis_auth, whose members may only INSERT and SELECT. Old rows go
-- through auth.prune_audit_events, which runs as the migration role
-- (SECURITY DEFINER) and deletes only rows recorded longer ago than the
-- retention it is given, never less than a day: a stolen auth credential
-- cannot rewrite the record or erase the last day of it.

-- +goose Up
CREATE TABLE auth.audit_events (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- When the edge served the read (its clock).
    occurred_at    timestamptz NOT NULL,
    -- When auth stored it (the database's clock): what retention counts from.
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    -- Which edge recorded it: the role of the credential that appended it.
    edge           text        NOT NULL,
    -- A key id, or an OAuth subject (principal_kind 'oauth'); never a secret.
    principal      text        NOT NULL DEFAULT '',
    principal_kind text        NOT NULL DEFAULT '',
    oauth_issuer   text        NOT NULL DEFAULT '',
    client_address text        NOT NULL DEFAULT '',
    client_name    text        NOT NULL DEFAULT '',
    -- The tool, resources/read, or the REST route.
    tool           text        NOT NULL,
    -- The kb:// URI or REST path read, when the tool names no query.
    target         text        NOT NULL DEFAULT '',
    -- NULL when the edge keeps only the hash (BMCIS_AUDIT_QUERY_TEXT=false).
    query          text,
    query_sha256   text        NOT NULL DEFAULT '',
    chunk_ids      bigint[]    NOT NULL DEFAULT '{}',
    -- 'ok', or the error code the caller was answered with.
    outcome        text        NOT NULL,
    request_id     text        NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_occurred ON auth.audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_principal ON auth.audit_events (principal, occurred_at DESC, id DESC);
-- Rows arrive in recorded_at order, so a BRIN index serves the pruning at
-- almost no cost to inserts.
CREATE INDEX audit_events_recorded ON auth.audit_events USING brin (recorded_at);

-- 00012's default privileges gave bmcis_auth every right on new tables in
-- its schema: keep only appending and reading.
REVOKE ALL ON auth.audit_events FROM bmcis_auth;
GRANT SELECT, INSERT ON auth.audit_events TO bmcis_auth;
-- An identity column needs no right on its sequence to insert; without
-- UPDATE on it, auth cannot move it either.
REVOKE ALL ON SEQUENCE auth.audit_events_id_seq FROM bmcis_auth;

-- +goose StatementBegin
CREATE FUNCTION auth.prune_audit_events(keep interval) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    deleted bigint;
BEGIN
    IF keep IS NULL OR keep < interval '1 day' THEN
        RAISE EXCEPTION 'audit retention must be at least 1 day, got %', keep USING ERRCODE = '22023';
    END IF;
    DELETE FROM auth.audit_events WHERE recorded_at < now() - keep;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END $$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION auth.prune_audit_events(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION auth.prune_audit_events(interval) TO bmcis_auth;

-- +goose Down
DROP FUNCTION auth.prune_audit_events(interval);
DROP TABLE auth.audit_events;
