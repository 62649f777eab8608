#!/usr/bin/env bash
# Builds the Claude Desktop extension bundle (make mcpb): cross-compiles the
# adapter (CGO_ENABLED=0) for each platform the manifest names, joins the
# two macOS builds into one universal binary (the manifest selects a server
# per OS only), then validates and packs with the official MCPB CLI pinned
# in package-lock.json.
#
# Environment:
#   MCPB_OUT        the bundle to write (default bin/bmcis-knowledge.mcpb)
#   MCPB_PLATFORMS  a subset of "darwin win32 linux" (default: all); tests
#                   build only their own platform
#   MCPB_LDFLAGS    Go linker flags (the Makefile stamps the version)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${MCPB_OUT:-$root/bin/bmcis-knowledge.mcpb}
platforms=${MCPB_PLATFORMS:-darwin win32 linux}
ldflags=${MCPB_LDFLAGS:--s -w}

# The CLI, exactly as locked; reinstalled when the lock changed.
if ! cmp -s "$here/package-lock.json" "$here/node_modules/.package-lock.json.src" 2>/dev/null; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$here/package-lock.json" "$here/node_modules/.package-lock.json.src"
fi
mcpb="$here/node_modules/.bin/mcpb"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$here/manifest.json" "$here/icon.png" "$stage/"

build() { # GOOS GOARCH output
  (cd "$root" && CGO_ENABLED=0 GOOS=$1 GOARCH=$2 go build -trimpath -ldflags "$ldflags" -o "$3" ./mcp-adapter/cmd/mcp-adapter)
}
for p in $platforms; do
  case $p in
    darwin)
      mkdir -p "$stage/server/darwin"
      build darwin arm64 "$stage/thin-arm64"
      build darwin amd64 "$stage/thin-amd64"
      (cd "$root" && go run ./deploy/mcpb/machofat -o "$stage/server/darwin/bmcis-mcp" "$stage/thin-arm64" "$stage/thin-amd64")
      rm "$stage/thin-arm64" "$stage/thin-amd64" ;;
    win32) build windows amd64 "$stage/server/win32/bmcis-mcp.exe" ;;
    linux) build linux amd64 "$stage/server/linux/bmcis-mcp" ;;
    *) echo "mcpb: unknown platform $p (darwin, win32, linux)" >&2; exit 2 ;;
  esac
done

"$mcpb" validate "$stage/manifest.json"
mkdir -p "$(dirname "$out")"
"$mcpb" pack "$stage" "$out"
