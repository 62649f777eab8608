#!/usr/bin/env bash
# The project-local PostgreSQL 15 + pgvector cluster.
#   db.sh start   install what is missing, init .data/postgres, start, create the database
#   db.sh stop    stop the cluster
#   db.sh url     print the application database URL
#   db.sh admin-url  print the URL of the maintenance database (for tests)
# With DATABASE_URL set, nothing local is started: `start` checks that URL.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# PostgreSQL's own files: data, socket and log. As root the server runs as
# the postgres user, which must reach them; when the checkout sits where that
# user cannot (under /root, say), they move to a directory of its own.
# Called again once install-deps.sh has created the postgres user.
pg_paths() {
  PG_HOME=$DATA
  if [ "$(id -u)" -eq 0 ] && id postgres >/dev/null 2>&1 && ! runuser -u postgres -- test -x "$DATA" 2>/dev/null; then
    PG_HOME=/var/lib/postgresql/bmcis-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
  fi
  PGDATA=$PG_HOME/postgres
  PG_RUN=$PG_HOME/run
  PG_LOG=$PG_HOME/logs/postgres.log
}
pg_paths

running() { [ -f "$PGDATA/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; }

start() {
  if [ -n "${DATABASE_URL:-}" ]; then
    command -v psql >/dev/null || "$ROOT/deploy/local/install-deps.sh"
    psql "$DATABASE_URL" -qAtc 'SELECT 1' >/dev/null || die "DATABASE_URL is set but the database does not answer"
    log "using DATABASE_URL"
    return
  fi
  "$ROOT/deploy/local/install-deps.sh"
  pg_paths
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    log "initializing $PGDATA"
    mkdir -p "$PGDATA"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    pwfile=$(mktemp)
    pg_password >"$pwfile"
    [ "$(id -u)" -eq 0 ] && chown postgres "$pwfile"
    as_pg "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=scram-sha-256 --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
  fi
  mkdir -p "$PG_RUN" "$(dirname "$PG_LOG")"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$PG_RUN" "$(dirname "$PG_LOG")"
  if ! running; then
    # A throwaway development cluster: durability settings are traded for speed;
    # shared_buffers holds the HNSW index of ~100k chunks (137 MB measured).
    as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PG_LOG" -w -t 60 start \
      -o "-p $PG_PORT -k $PG_RUN -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=512MB" >/dev/null \
      || { tail -n 20 "$PG_LOG" >&2; die "PostgreSQL did not start"; }
    log "PostgreSQL listening on 127.0.0.1:$PG_PORT"
  fi
  require_password
  if [ "$(psql "$(local_db_url postgres)" -qAtc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != 1 ]; then
    psql "$(local_db_url postgres)" -qc "CREATE DATABASE $DB_NAME" >/dev/null
    log "created database $DB_NAME"
  fi
}

# require_password moves a cluster made before passwords (trust auth) to
# scram-sha-256 with the generated password; a no-op once done.
require_password() {
  local hba=$PGDATA/pg_hba.conf
  as_pg grep -qE '^[^#]*[[:space:]]trust([[:space:]]|$)' "$hba" || return 0
  psql "postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable" -qc \
    "SET password_encryption = 'scram-sha-256'; ALTER ROLE postgres PASSWORD '$(pg_password)'" >/dev/null
  printf 'local all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n' |
    as_pg tee "$hba" >/dev/null
  as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" reload >/dev/null
  log "PostgreSQL now requires the generated password (scram-sha-256)"
}

stop() {
  if running; then
    as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
    log "PostgreSQL stopped"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) if [ -n "${DATABASE_URL:-}" ]; then printf '%s' "$DATABASE_URL"; else local_db_url; fi ;;
  admin-url) if [ -n "${DATABASE_URL:-}" ]; then printf '%s' "$DATABASE_URL"; else local_db_url postgres; fi ;;
  *) echo "usage: $0 start|stop|url|admin-url" >&2; exit 2 ;;
esac
