#!/usr/bin/env bash
# Prints the Claude Desktop configuration for the local stack (run.sh calls
# it at the end of `make run`):
#
#   desktop-config.sh          where to put it, then the JSON
#   desktop-config.sh print    the JSON alone on stdout (to paste or redirect)
#
# Claude Desktop starts its own bin/mcp-adapter over stdio with the demo API
# key (.data/demo-api-key, created by demo-data.sh), the service token
# (.data/service-token) and the service addresses; run.sh separately runs
# the adapter over streamable HTTP on 127.0.0.1:8090 for remote clients and
# the dashboard. The JSON holds secrets: keep it private.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

SEARCH_ADDR=${BMCIS_SEARCH_ADDR:-127.0.0.1:50051}
VENDORGRAPH_ADDR=${BMCIS_VENDORGRAPH_ADDR:-127.0.0.1:50052}
AUTH_ADDR=${BMCIS_AUTH_ADDR:-127.0.0.1:50053}

# json_string VALUE: VALUE as a JSON string literal.
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$s"
}

print_config() {
  local key_file=$DATA/demo-api-key
  [ -s "$key_file" ] || die "$key_file is missing: run \`make run\` (demo-data.sh creates the demo API key)"
  local key token
  key=$(cat "$key_file")
  token=${BMCIS_SERVICE_TOKEN:-$(secret service-token)}
  cat <<EOF
{
  "mcpServers": {
    "bmcis-knowledge": {
      "command": $(json_string "$ROOT/bin/mcp-adapter"),
      "env": {
        "BMCIS_API_KEY": $(json_string "$key"),
        "BMCIS_SERVICE_TOKEN": $(json_string "$token"),
        "BMCIS_SEARCH_ADDR": $(json_string "$SEARCH_ADDR"),
        "BMCIS_VENDORGRAPH_ADDR": $(json_string "$VENDORGRAPH_ADDR"),
        "BMCIS_AUTH_ADDR": $(json_string "$AUTH_ADDR")
      }
    }
  }
}
EOF
}

case "${1:-}" in
  print)
    print_config
    ;;
  "")
    if [ ! -s "$DATA/demo-api-key" ]; then
      log "no demo API key ($DATA/demo-api-key): no Claude Desktop configuration to print"
      exit 0
    fi
    config=$(print_config)
    echo
    echo "  Claude Desktop: add this to claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/,"
    echo "  Windows: %APPDATA%\\Claude\\) and restart Desktop; it starts $ROOT/bin/mcp-adapter over stdio."
    echo "  It holds the demo API key and the service token: keep it private. Print it again (JSON only) with"
    echo "  deploy/local/desktop-config.sh print"
    echo
    echo "$config"
    echo
    ;;
  *)
    die "usage: desktop-config.sh [print]"
    ;;
esac
