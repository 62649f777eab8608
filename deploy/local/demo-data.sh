#!/usr/bin/env bash
# Loads the demo data into the running stack. Each step is idempotent, so
# `make run` may call it every time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
# Steps are added here as the services that own the data come to exist.

# --- search: demo documents ---

# --- vendorgraph: demo graph ---

# --- auth: demo API key ---
