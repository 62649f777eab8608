#!/usr/bin/env bash
# `make stop`: stop the services (SIGTERM, so they drain), then Redis and
# PostgreSQL. `stop.sh services` stops only the services.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Signal every service first, then wait: they drain in parallel.
pids=()
for pidfile in "$RUN"/*.pid; do
  [ -e "$pidfile" ] || continue
  name=$(basename "$pidfile" .pid)
  [ "$name" = redis ] && continue
  pid=$(cat "$pidfile")
  rm -f "$pidfile"
  # A PID file can outlive its process (a reboot): signal only our binary
  # (shown as deleted once `make build` has replaced the file).
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  [ "$exe" = "$ROOT/bin/$name" ] || [ "$exe" = "$ROOT/bin/$name (deleted)" ] || continue
  if kill -TERM "$pid" 2>/dev/null; then
    pids+=("$pid")
    log "stopping $name"
  fi
done
for pid in ${pids[@]+"${pids[@]}"}; do
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
done

if [ "${1:-all}" = all ]; then
  "$ROOT/deploy/local/redis.sh" stop
  "$ROOT/deploy/local/db.sh" stop
fi
