#!/usr/bin/env bash
# The project-local Redis (shared rate-limit state for multi-replica auth).
#   redis.sh start | stop | url
# With REDIS_URL set, nothing local is started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PIDFILE=$RUN/redis.pid

# Asked of Redis itself: a PID file can outlive its process.
ping() { REDISCLI_AUTH=$(redis_password) redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }
running() { [ -f "$PIDFILE" ] && ping; }
# unprotected: answering without the password (a Redis from before passwords).
unprotected() { redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

start() {
  if [ -n "${REDIS_URL:-}" ]; then log "using REDIS_URL"; return; fi
  command -v redis-server >/dev/null || "$ROOT/deploy/local/install-deps.sh"
  if running && ! unprotected; then return; fi
  mkdir -p "$DATA/redis"
  # A Redis from before passwords still holds the port: stop it first.
  if [ -f "$PIDFILE" ]; then kill "$(cat "$PIDFILE")" 2>/dev/null || true; rm -f "$PIDFILE"; sleep 0.2; fi
  # The password goes in through a config file on stdin, not the command line.
  printf 'requirepass %s\n' "$(redis_password)" | redis-server - --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
    --pidfile "$PIDFILE" --dir "$DATA/redis" --logfile "$LOGS/redis.log" \
    --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do
    ping && { log "Redis listening on 127.0.0.1:$REDIS_PORT (password required)"; return; }
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
  url) if [ -n "${REDIS_URL:-}" ]; then printf '%s' "$REDIS_URL"; else printf 'redis://:%s@127.0.0.1:%s/0' "$(redis_password)" "$REDIS_PORT"; fi ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
