#!/usr/bin/env bash
# Loads the demo data into the running stack. Each step is idempotent, so
# `make run` may call it every time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
# Steps are added here as the services that own the data come to exist.

# --- search: demo documents ---
# 40 markdown pages and two each of PDF, DOCX and HTML. Idempotent: unchanged documents are skipped (content
# hash), so this is a no-op after the first run. The first run also trains
# the builtin embedder on them (a few seconds).
if [ -x bin/search ]; then
  log "search: ingesting the demo documents"
  BMCIS_SEARCH_ADDR=${BMCIS_SEARCH_ADDR:-127.0.0.1:50051} \
    bin/bmcisctl ingest -quiet services/search/demo/docs >&2
fi

# --- vendorgraph: demo graph ---
# A dozen vendors, their entities and relationships. Re-importing an
# unchanged file changes nothing, so this runs on every `make run`.
if [ -x bin/vendorgraph ]; then
  log "vendorgraph: importing the demo graph"
  BMCIS_VENDORGRAPH_ADDR=${BMCIS_VENDORGRAPH_ADDR:-127.0.0.1:50052} \
    bin/bmcisctl graph import -quiet services/vendorgraph/demo/demo-graph.jsonl >&2
fi

# --- auth: demo API key ---
# A demo key for the MCP adapter and the gateway, kept in .data/demo-api-key
# (mode 0600). Reused while the auth service still lists its key id as active
# (not revoked, not expired, same database); otherwise a new one is created.
# The secret never appears on a command line.
if [ -x bin/bmcisctl ] && [ -x bin/auth ]; then
  demo_key_file=$DATA/demo-api-key
  demo_key_valid() {
    [ -s "$demo_key_file" ] || return 1
    local id active
    id=$(sed -n 's/^bmcis_\([a-z2-7]\{16\}\)_[a-z2-7]\{52\}$/\1/p' "$demo_key_file")
    [ -n "$id" ] || return 1
    active=$(bin/bmcisctl keys list -q --owner demo) || return 1
    grep -qxF "$id" <<<"$active"
  }
  if demo_key_valid; then
    log "demo API key: reusing $demo_key_file"
  else
    if ! (umask 077 && bin/bmcisctl keys create --name demo --owner demo --expires-in 90d >"$demo_key_file.tmp"); then
      rm -f "$demo_key_file.tmp"
      die "could not create the demo API key (is the auth service up, BMCIS_ADMIN_TOKEN set?)"
    fi
    mv -f "$demo_key_file.tmp" "$demo_key_file"
    chmod 600 "$demo_key_file"
    log "demo API key: created, in $demo_key_file"
  fi
fi
