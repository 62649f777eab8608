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

# A signing identity is checked before anything is built: `mcpb sign`
# itself accepts a key that is not the certificate's (and writes a
# signature no one can verify), reads only the first certificate of a PEM
# file, and fails on EC or encrypted keys.
sigdir=
if [ -n "${MCPB_SIGN_CERT:-}${MCPB_SIGN_KEY:-}${MCPB_SIGN_CHAIN:-}" ]; then
  refuse() { echo "mcpb: $*" >&2; exit 2; }
  [ -n "${MCPB_SIGN_CERT:-}" ] && [ -n "${MCPB_SIGN_KEY:-}" ] || refuse "signing needs both MCPB_SIGN_CERT and MCPB_SIGN_KEY"
  command -v openssl >/dev/null 2>&1 || refuse "signing needs openssl (to check the identity before signing)"
  read -r -d '' -a chainfiles <<< "${MCPB_SIGN_CHAIN:-}" || true # spaces or newlines
  for f in "$MCPB_SIGN_CERT" "$MCPB_SIGN_KEY" ${chainfiles[@]+"${chainfiles[@]}"}; do
    [ -r "$f" ] || refuse "cannot read signing file $f"
  done
  sigdir=$(mktemp -d)
  trap 'rm -rf "$sigdir"' EXIT
  # One file per certificate: the first of MCPB_SIGN_CERT signs, every other
  # certificate (its own chain, then MCPB_SIGN_CHAIN's) is embedded.
  n=0
  for f in "$MCPB_SIGN_CERT" ${chainfiles[@]+"${chainfiles[@]}"}; do
    before=$n
    n=$(awk -v dir="$sigdir" -v n="$n" '
      /-----BEGIN CERTIFICATE-----/ { n++; out = sprintf("%s/cert-%03d.pem", dir, n) }
      out != "" { print > out }
      /-----END CERTIFICATE-----/ { close(out); out = "" }
      END { print n }' "$f")
    [ "$n" -gt "$before" ] || refuse "$f holds no PEM certificate"
  done
  for c in "$sigdir"/cert-*.pem; do
    openssl x509 -in "$c" -noout 2>/dev/null || refuse "a certificate in the signing files does not parse"
  done
  leaf=$sigdir/cert-001.pem
  leaftext=$(openssl x509 -in "$leaf" -noout -text)
  grep -q 'Public Key Algorithm: rsaEncryption' <<< "$leaftext" ||
    refuse "MCPB_SIGN_CERT's key is not RSA (the MCPB CLI signs with RSA keys only)"
  ! grep -q ENCRYPTED "$MCPB_SIGN_KEY" || refuse "MCPB_SIGN_KEY is encrypted; the MCPB CLI needs it unencrypted"
  first=$(grep -m1 -- '-----BEGIN' "$MCPB_SIGN_KEY" | tr -d '\r' || true)
  case $first in
    "-----BEGIN PRIVATE KEY-----"|"-----BEGIN RSA PRIVATE KEY-----") ;;
    *) refuse "MCPB_SIGN_KEY does not start with a PEM private key" ;;
  esac
  certkey=$(openssl x509 -in "$leaf" -noout -pubkey 2>/dev/null) || certkey=
  ownkey=$(openssl pkey -passin pass: -in "$MCPB_SIGN_KEY" -pubout 2>/dev/null) || ownkey=
  [ -n "$certkey" ] && [ "$certkey" = "$ownkey" ] || refuse "MCPB_SIGN_KEY is not the key of MCPB_SIGN_CERT"
  # A signed bundle was asked for: no older file may stand in for it.
  rm -f "$out"
fi

# The CLI, exactly as locked; reinstalled when the lock changed.
if ! cmp -s "$here/package-lock.json" "$here/node_modules/.package-lock.json.src" 2>/dev/null; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$here/package-lock.json" "$here/node_modules/.package-lock.json.src"
fi
mcpb="$here/node_modules/.bin/mcpb"

stage=$(mktemp -d)
trap 'rm -rf "$stage" ${sigdir:+"$sigdir"}' EXIT
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
# Packed (and signed) beside the output, then renamed: a failed signing
# never leaves an unsigned bundle where a signed one was asked for.
packed=$(dirname "$out")/.$(basename "$out" .mcpb).$$.mcpb
trap 'rm -rf "$stage" "$packed" ${sigdir:+"$sigdir"}' EXIT
"$mcpb" pack "$stage" "$packed"
if [ -n "$sigdir" ]; then
  intermediates=()
  for c in "$sigdir"/cert-*.pem; do
    [ "$c" = "$leaf" ] || intermediates+=(--intermediate "$c")
  done
  # The CLI reports failures on stdout: keep its output for the error.
  if ! log=$("$mcpb" sign "$packed" --cert "$leaf" --key "$MCPB_SIGN_KEY" ${intermediates[@]+"${intermediates[@]}"} 2>&1) ||
     ! grep -q "Successfully signed" <<< "$log"; then
    echo "mcpb: signing failed:" >&2; echo "$log" >&2; exit 1
  fi
  echo "mcpb: signed as $(openssl x509 -in "$leaf" -noout -subject)" >&2
fi
mv "$packed" "$out"
echo "mcpb: wrote $out" >&2
