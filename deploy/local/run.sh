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

# One credential per caller role (platform/rpcauth): the gateway holds the
# read one, the MCP adapter its own (reads, and OAuth subjects to auth);
# bmcisctl (demo data, operators) the ingest and admin ones, through
# .data/bmcisctl.json; vendorgraph its own for calling search (the names an
# import changed). The services hold only digests.
READ_TOKEN=$(secret read-token)
ADAPTER_TOKEN=$(secret adapter-token)
INGEST_TOKEN=$(secret ingest-token)
ADMIN_TOKEN=$(secret admin-token)
VENDORGRAPH_TOKEN=$(secret vendorgraph-token)
READ_SHA=$(sha256 "$READ_TOKEN")
ADAPTER_SHA=$(sha256 "$ADAPTER_TOKEN")
INGEST_SHA=$(sha256 "$INGEST_TOKEN")
ADMIN_SHA=$(sha256 "$ADMIN_TOKEN")
VENDORGRAPH_SHA=$(sha256 "$VENDORGRAPH_TOKEN")

# The local stack's addresses and operator credentials, for bmcisctl run
# anywhere in the checkout (it looks for .data/bmcisctl.json upward, like
# kubectl's kubeconfig; the environment overrides it).
(umask 077 && cat >"$DATA/bmcisctl.json.tmp" <<JSON
{
  "BMCIS_SEARCH_ADDR": "127.0.0.1:50051",
  "BMCIS_VENDORGRAPH_ADDR": "127.0.0.1:50052",
  "BMCIS_AUTH_ADDR": "127.0.0.1:50053",
  "BMCIS_SERVICE_TOKEN": "$READ_TOKEN",
  "BMCIS_INGEST_TOKEN": "$INGEST_TOKEN",
  "BMCIS_ADMIN_TOKEN": "$ADMIN_TOKEN",
  "DATABASE_URL": "$DATABASE_URL"
}
JSON
) && mv -f "$DATA/bmcisctl.json.tmp" "$DATA/bmcisctl.json"

# Each service connects as its own role, which reaches its own schema only;
# DATABASE_URL (the migration role) stays with bmcisctl, which sets the
# services' roles up after migrating.
DATABASE_URL=$DATABASE_URL \
  BMCIS_SEARCH_DATABASE_URL=$(service_db_url search "$DATABASE_URL") \
  BMCIS_VENDORGRAPH_DATABASE_URL=$(service_db_url vendorgraph "$DATABASE_URL") \
  BMCIS_AUTH_DATABASE_URL=$(service_db_url auth "$DATABASE_URL") \
  bin/bmcisctl migrate up >&2

"$ROOT/deploy/local/stop.sh" services

# search benchmarks best with more connections than the default 10.
export DATABASE_MAX_CONNS=${DATABASE_MAX_CONNS:-20}

# name grpc-port metrics-port
SERVICES=(
  "search 50051 9091"
  "vendorgraph 50052 9092"
  "auth 50053 9093"
)

# creds NAME: the environment of a service: its database role, and the digests of
# the roles that may call it (search: read, adapter, ingest, vendorgraph;
# vendorgraph: read, adapter, ingest, and its credential and address for
# search; auth: read, adapter, admin); auth alone gets Redis.
creds() {
  case $1 in
    search) echo "DATABASE_URL=$(service_db_url search "$DATABASE_URL") BMCIS_READ_TOKEN_SHA256=$READ_SHA BMCIS_ADAPTER_TOKEN_SHA256=$ADAPTER_SHA BMCIS_INGEST_TOKEN_SHA256=$INGEST_SHA BMCIS_VENDORGRAPH_TOKEN_SHA256=$VENDORGRAPH_SHA" ;;
    vendorgraph) echo "DATABASE_URL=$(service_db_url vendorgraph "$DATABASE_URL") BMCIS_READ_TOKEN_SHA256=$READ_SHA BMCIS_ADAPTER_TOKEN_SHA256=$ADAPTER_SHA BMCIS_INGEST_TOKEN_SHA256=$INGEST_SHA BMCIS_VENDORGRAPH_TOKEN=$VENDORGRAPH_TOKEN BMCIS_SEARCH_ADDR=127.0.0.1:50051" ;;
    auth) echo "DATABASE_URL=$(service_db_url auth "$DATABASE_URL") REDIS_URL=$REDIS_URL BMCIS_READ_TOKEN_SHA256=$READ_SHA BMCIS_ADAPTER_TOKEN_SHA256=$ADAPTER_SHA BMCIS_ADMIN_TOKEN_SHA256=$ADMIN_SHA" ;;
  esac
}

# start NAME [VAR=VALUE...]: run bin/NAME in the background with extra env.
start() {
  local name=$1
  shift
  env -u DATABASE_URL -u REDIS_URL -u BMCIS_SERVICE_TOKEN -u BMCIS_INGEST_TOKEN -u BMCIS_ADMIN_TOKEN \
    "$@" nohup "bin/$name" >>"$LOGS/$name.log" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

show_logs() {
  for name in "$@"; do
    echo "--- $LOGS/$name.log" >&2
    tail -n 5 "$LOGS/$name.log" >&2 || true
  done
}

addrs=()
names=()
for entry in "${SERVICES[@]}"; do
  read -r name port mport <<<"$entry"
  [ -x "bin/$name" ] || continue
  # shellcheck disable=SC2046 # creds prints VAR=value words without spaces
  start "$name" BMCIS_GRPC_ADDR=127.0.0.1:$port BMCIS_METRICS_ADDR=127.0.0.1:$mport $(creds "$name")
  addrs+=("127.0.0.1:$port")
  names+=("$name")
done

if ! bin/bmcisctl health -wait 30s "${addrs[@]}" >/dev/null; then
  log "a service did not become healthy; last log lines:"
  show_logs "${names[@]}"
  exit 1
fi
# Healthy must mean the process just started, not an old one on that port.
for name in "${names[@]}"; do
  kill -0 "$(cat "$RUN/$name.pid")" 2>/dev/null || { log "$name exited (is its port taken by another process?)"; show_logs "$name"; exit 1; }
done

# wait_http NAME URL: wait up to 30 s for URL to answer 2xx.
wait_http() {
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$2" 2>/dev/null && return 0
    sleep 0.2
  done
  log "$1 did not become healthy; last log lines:"
  show_logs "$1"
  exit 1
}

http_up=()
if [ -x bin/mcp-adapter ]; then
  # The remote (streamable HTTP) transport; Claude Desktop starts its own copy
  # over stdio with the configuration printed below.
  start mcp-adapter BMCIS_MCP_TRANSPORT=http BMCIS_MCP_HTTP_ADDR=127.0.0.1:8090 BMCIS_MCP_METRICS_ADDR=127.0.0.1:9095 \
    BMCIS_SERVICE_TOKEN="$ADAPTER_TOKEN" BMCIS_CURSOR_SECRET="$(secret cursor-secret)"
  wait_http mcp-adapter http://127.0.0.1:8090/healthz
  http_up+=(mcp-adapter)
fi
if [ -x bin/gateway ]; then
  start gateway BMCIS_GATEWAY_ADDR=127.0.0.1:8080 BMCIS_GATEWAY_METRICS_ADDR=127.0.0.1:9094 \
    BMCIS_MCP_HTTP_ADDR=127.0.0.1:8090 BMCIS_MCP_METRICS_URL=http://127.0.0.1:9095/metrics BMCIS_SERVICE_TOKEN="$READ_TOKEN"
  wait_http gateway http://127.0.0.1:8080/healthz
  http_up+=(gateway)
fi

"$ROOT/deploy/local/demo-data.sh"

echo
for entry in "${SERVICES[@]}"; do
  read -r name port mport <<<"$entry"
  [ -x "bin/$name" ] || continue
  printf '  %-12s grpc 127.0.0.1:%s   metrics http://127.0.0.1:%s/metrics   log %s\n' "$name" "$port" "$mport" "$LOGS/$name.log"
done
[ -x bin/mcp-adapter ] && printf '  %-12s http://127.0.0.1:8090/mcp (streamable HTTP; key in X-API-Key)   log %s\n' mcp-adapter "$LOGS/mcp-adapter.log"
[ -x bin/gateway ] && printf '  %-12s http://127.0.0.1:8080/ (dashboard; REST under /v1, OpenAPI at /openapi.json)   log %s\n' gateway "$LOGS/gateway.log"
printf '  %-12s %s\n' postgres "127.0.0.1:$PG_PORT (superuser password in $DATA/pg-password; each service its own role, $DATA/pg-SERVICE-password)" redis "127.0.0.1:$REDIS_PORT (password in $DATA/redis-password)" \
  bmcisctl "reads the addresses and operator credentials from $DATA/bmcisctl.json"
echo
echo "  try: tools/run grpcurl -plaintext 127.0.0.1:50051 list   (builds the pinned grpcurl once)"
[ -x deploy/local/desktop-config.sh ] && deploy/local/desktop-config.sh
echo "ready: $(( ${#addrs[@]} + ${#http_up[@]} )) services healthy (${names[*]} ${http_up[*]}); demo API key in $DATA/demo-api-key; stop with \`make stop\`"
