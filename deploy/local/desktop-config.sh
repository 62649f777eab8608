#!/usr/bin/env bash
# Prints the Claude Desktop configuration for the local stack (run.sh calls
# it at the end of `make run`):
#
#   desktop-config.sh          where to put it, then the JSON
#   desktop-config.sh print    the JSON alone on stdout (to paste or redirect)
#
# Claude Desktop starts its own bin/mcp-adapter over stdio in bridge mode:
# it forwards every call to the adapter's streamable-HTTP endpoint that
# run.sh starts on 127.0.0.1:8090, with the demo API key
# (.data/demo-api-key, created by demo-data.sh). The configuration holds
# only the endpoint's URL and that key: no service credential and no
# service address. Keep it private all the same (the key is a secret).
#
# Overrides: BMCIS_MCP_URL (the endpoint), BMCIS_MCP_ADAPTER_BIN (the
# adapter binary), BMCIS_DATA_DIR (where demo-api-key is).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

MCP_URL=${BMCIS_MCP_URL:-http://127.0.0.1:8090/mcp}
ADAPTER_BIN=${BMCIS_MCP_ADAPTER_BIN:-$ROOT/bin/mcp-adapter}

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
  local key
  key=$(cat "$key_file")
  cat <<EOF
{
  "mcpServers": {
    "bmcis-knowledge": {
      "command": $(json_string "$ADAPTER_BIN"),
      "env": {
        "BMCIS_MCP_URL": $(json_string "$MCP_URL"),
        "BMCIS_API_KEY": $(json_string "$key")
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
    echo "  Windows: %APPDATA%\\Claude\\) and restart Desktop; it starts $ADAPTER_BIN over stdio, which forwards"
    echo "  to $MCP_URL with the demo API key (and nothing else: keep the key private). Print it again (JSON only) with"
    echo "  deploy/local/desktop-config.sh print"
    echo
    echo "$config"
    echo
    ;;
  *)
    die "usage: desktop-config.sh [print]"
    ;;
esac
