#!/usr/bin/env bash
# The project-local Redis (shared rate-limit state for multi-replica auth).
#   redis.sh start | stop | url
# With REDIS_URL set, nothing local is started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PIDFILE=$RUN/redis.pid

# Asked of Redis itself: a PID file can outlive its process.
running() { [ -f "$PIDFILE" ] && redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; }

start() {
  if [ -n "${REDIS_URL:-}" ]; then log "using REDIS_URL"; return; fi
  command -v redis-server >/dev/null || "$ROOT/deploy/local/install-deps.sh"
  if running; then return; fi
  mkdir -p "$DATA/redis"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --pidfile "$PIDFILE" --dir "$DATA/redis" --logfile "$LOGS/redis.log" \
    --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && { log "Redis listening on 127.0.0.1:$REDIS_PORT"; return; }
    sleep 0.1
  done
  die "Redis did not start (see $LOGS/redis.log)"
}

stop() {
  if running; then
    kill "$(cat "$PIDFILE")" && rm -f "$PIDFILE"
    log "Redis stopped"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) if [ -n "${REDIS_URL:-}" ]; then printf '%s' "$REDIS_URL"; else printf 'redis://127.0.0.1:%s/0' "$REDIS_PORT"; fi ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
