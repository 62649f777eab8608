#!/usr/bin/env bash
# Installs what the local stack needs on Debian bookworm, only what is missing:
# PostgreSQL 15 (+ server headers), pgvector (built from Debian's source package,
# since bookworm ships no binary), Redis. Idempotent; never touches the machine's
# own apt sources.
set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
PG_BIN=/usr/lib/postgresql/${PG_MAJOR}/bin
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${BMCIS_CACHE_DIR:-$ROOT/.data/cache}

log() { printf 'install-deps: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need=()
[ -x "$PG_BIN/postgres" ] || need+=("postgresql-${PG_MAJOR}" "postgresql-contrib")
[ -f "/usr/include/postgresql/${PG_MAJOR}/server/postgres.h" ] || need+=("postgresql-server-dev-${PG_MAJOR}")
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v curl >/dev/null 2>&1 || need+=(curl)
# The bundle test signs and verifies the Desktop extension with it.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# The adapter's end-to-end test drives it from the official Node MCP client.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  apt_install "${need[@]}"
fi

# The Debian package starts a system-wide redis on 6379; the project runs its own
# on a private port, so the system one is left alone (not our machine to manage).

sharedir=$("$PG_BIN/pg_config" --sharedir)
if [ ! -f "$sharedir/extension/vector.control" ]; then
  log "building pgvector from Debian's source package"
  command -v dpkg-source >/dev/null 2>&1 || apt_install dpkg-dev
  work="$CACHE/pgvector"
  mkdir -p "$work/lists/partial" "$work/archives/partial"
  echo "deb-src http://deb.debian.org/debian trixie main" > "$work/sources.list"
  aptopts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
           -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::archives=$work/archives"
           -o "APT::Sandbox::User=root")
  as_root apt-get "${aptopts[@]}" update -qq
  (cd "$work" && as_root apt-get "${aptopts[@]}" source --download-only -qq pgvector)
  tarball=$(ls "$work"/pgvector_*.orig.tar.* | head -n1)
  rm -rf "$work/src" && mkdir -p "$work/src"
  tar -xf "$tarball" -C "$work/src" --strip-components=1
  make -s -C "$work/src" PG_CONFIG="$PG_BIN/pg_config" OPTFLAGS="" >/dev/null
  as_root make -s -C "$work/src" PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
  log "pgvector installed"
fi
# promtool checks the shipped alert rules and dashboard (deploy/monitoring).
# Only the binary is taken from Debian's prometheus package, unpacked rather
# than installed, so no Prometheus daemon is ever set up or started.
if ! command -v promtool >/dev/null 2>&1; then
  log "installing promtool from Debian's prometheus package"
  [ "$apt_updated" -eq 1 ] || { as_root apt-get update -qq; apt_updated=1; }
  work="$CACHE/prometheus"
  rm -rf "$work" && mkdir -p "$work"
  (cd "$work" && apt-get -o APT::Sandbox::User=root download -qq prometheus)
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  as_root install -m 0755 "$work/root/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$work"
  log "promtool installed: $(promtool --version 2>&1 | head -n1)"
fi
log "dependencies present"
