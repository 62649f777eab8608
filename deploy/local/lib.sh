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
