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
#   MCPB_SIGN_CERT, MCPB_SIGN_KEY
#                   sign the bundle (PKCS#7, `mcpb sign`) with this code-signing
#                   certificate and RSA key (PEM files); both or neither
#   MCPB_SIGN_CHAIN intermediate certificates to embed (PEM files, space-separated)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${MCPB_OUT:-$root/bin/bmcis-knowledge.mcpb}
platforms=${MCPB_PLATFORMS:-darwin win32 linux}
ldflags=${MCPB_LDFLAGS:--s -w}

# Refuse a half-given signing identity before building anything.
if [ -n "${MCPB_SIGN_CERT:-}${MCPB_SIGN_KEY:-}${MCPB_SIGN_CHAIN:-}" ]; then
  if [ -z "${MCPB_SIGN_CERT:-}" ] || [ -z "${MCPB_SIGN_KEY:-}" ]; then
    echo "mcpb: signing needs both MCPB_SIGN_CERT and MCPB_SIGN_KEY" >&2; exit 2
  fi
  for f in "$MCPB_SIGN_CERT" "$MCPB_SIGN_KEY" ${MCPB_SIGN_CHAIN:-}; do
    [ -r "$f" ] || { echo "mcpb: cannot read signing file $f" >&2; exit 2; }
  done
  # mcpb sign does not check that the key belongs to the certificate (it
  # would write a signature no one can verify), so compare public keys.
  certkey=$(openssl x509 -in "$MCPB_SIGN_CERT" -noout -pubkey 2>/dev/null) || certkey=
  ownkey=$(openssl pkey -in "$MCPB_SIGN_KEY" -pubout 2>/dev/null) || ownkey=
  if [ -z "$certkey" ] || [ "$certkey" != "$ownkey" ]; then
    echo "mcpb: MCPB_SIGN_KEY is not the key of MCPB_SIGN_CERT (or one of them is not PEM)" >&2; exit 2
  fi
fi

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

if [ -n "${MCPB_SIGN_CERT:-}" ]; then
  chain=()
  for f in ${MCPB_SIGN_CHAIN:-}; do chain+=(--intermediate "$f"); done
  "$mcpb" sign "$out" --cert "$MCPB_SIGN_CERT" --key "$MCPB_SIGN_KEY" ${chain[@]+"${chain[@]}"} >/dev/null
  echo "mcpb: signed $out" >&2
fi
