#!/usr/bin/env bash
# `make run`: database (+ Redis), migrations, demo data, every service in the
# background, health-checked. Safe to run again: running services are
# restarted on the fresh build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

"$ROOT/deploy/local/db.sh" start
"$ROOT/deploy/local/redis.sh" start
DATABASE_URL=$("$ROOT/deploy/local/db.sh" url)
REDIS_URL=$("$ROOT/deploy/local/redis.sh" url)
export DATABASE_URL REDIS_URL
export BMCIS_SERVICE_TOKEN=${BMCIS_SERVICE_TOKEN:-$(secret service-token)}
export BMCIS_ADMIN_TOKEN=${BMCIS_ADMIN_TOKEN:-$(secret admin-token)}

bin/bmcisctl migrate up >&2

"$ROOT/deploy/local/stop.sh" services

# name grpc-port metrics-port
SERVICES=(
  "search 50051 9091"
  "vendorgraph 50052 9092"
  "auth 50053 9093"
)

addrs=()
for entry in "${SERVICES[@]}"; do
  read -r name port mport <<<"$entry"
  [ -x "bin/$name" ] || continue
  BMCIS_GRPC_ADDR=127.0.0.1:$port BMCIS_METRICS_ADDR=127.0.0.1:$mport \
    nohup "bin/$name" >>"$LOGS/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
  addrs+=("127.0.0.1:$port")
done

if ! bin/bmcisctl health -wait 30s "${addrs[@]}" >/dev/null; then
  log "a service did not become healthy; last log lines:"
  for entry in "${SERVICES[@]}"; do
    read -r name _ <<<"$entry"
    echo "--- $LOGS/$name.log" >&2
    tail -n 5 "$LOGS/$name.log" >&2 || true
  done
  exit 1
fi

"$ROOT/deploy/local/demo-data.sh"

echo
for entry in "${SERVICES[@]}"; do
  read -r name port mport <<<"$entry"
  [ -x "bin/$name" ] || continue
  printf '  %-12s grpc 127.0.0.1:%s   metrics http://127.0.0.1:%s/metrics   log %s\n' "$name" "$port" "$mport" "$LOGS/$name.log"
done
printf '  %-12s %s\n' postgres "$DATABASE_URL" redis "$REDIS_URL"
echo
echo "  try: grpcurl -plaintext 127.0.0.1:50051 list"
echo "ready: ${#addrs[@]} services healthy; stop them with \`make stop\`"
