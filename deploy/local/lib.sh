# Shared by the local stack scripts: paths, ports and small helpers.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DATA=${BMCIS_DATA_DIR:-$ROOT/.data}
LOGS=$DATA/logs
RUN=$DATA/run
PG_MAJOR=${PG_MAJOR:-15}
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
PG_PORT=${BMCIS_PG_PORT:-55432}
REDIS_PORT=${BMCIS_REDIS_PORT:-56379}
DB_NAME=${BMCIS_DB_NAME:-bmcis}

mkdir -p "$LOGS" "$RUN"

log() { printf '%s: %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# PostgreSQL refuses to run as root: as root, act as the postgres user.
# (From /, which the postgres user can always enter; every path is absolute.)
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# The local cluster's superuser password (scram-sha-256; generated once).
pg_password() { secret pg-password; }

local_db_url() {
  local db=${1:-$DB_NAME}
  printf 'postgres://postgres:%s@127.0.0.1:%s/%s?sslmode=disable' "$(pg_password)" "$PG_PORT" "$db"
}

# The local Redis's requirepass (generated once).
redis_password() { secret redis-password; }

# sha256 VALUE: the hex digest services are given instead of a credential.
sha256() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# secret NAME: a random token kept in .data/NAME (created once, mode 0600).
secret() {
  local f=$DATA/$1
  if [ ! -s "$f" ]; then
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$f")
  fi
  cat "$f"
}

# The services' own database roles (migrations/00012_service_schemas.sql):
# a LOGIN role per service, member of the service's group role, with a
# generated password kept in .data/pg-NAME-password, set up by `bmcisctl
# migrate up` from BMCIS_NAME_DATABASE_URL. The migration role (the
# cluster's superuser locally) runs the DDL; no service connects as it.
service_db_login() { printf 'bmcis_%s_login' "$1"; }
service_db_password() { secret "pg-$1-password"; }

# service_db_url NAME ADMIN_URL: ADMIN_URL with the service's login role.
service_db_url() {
  local rest=${2#*://}
  case $2 in postgres://* | postgresql://*) ;; *) die "DATABASE_URL must be a postgres:// URL to derive the services' own" ;; esac
  rest=${rest#*@}
  printf 'postgres://%s:%s@%s' "$(service_db_login "$1")" "$(service_db_password "$1")" "$rest"
}
