#!/usr/bin/env bash
# Builds the binaries a rolling-upgrade test runs, with `make build`'s flags
# (-trimpath, the same -ldflags) and the shared Go build and module caches.
#
#   deploy/upgrade/build.sh current  OUT_DIR   this checkout's binaries
#   deploy/upgrade/build.sh previous OUT_DIR   the commit in PREVIOUS_RELEASE,
#                                              exported from git history into
#                                              a temporary directory
#
# Nothing is cached between runs: OUT_DIR is the caller's (a temporary
# directory), and the previous release's source is removed once built.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

which=${1:?usage: build.sh current|previous OUT_DIR}
out=${2:?usage: build.sh current|previous OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The binaries of a stack; `make build` lists the same packages.
binaries=(
  search=./services/search/cmd/search
  vendorgraph=./services/vendorgraph/cmd/vendorgraph
  auth=./services/auth/cmd/auth
  bmcisctl=./bmcisctl/cmd/bmcisctl
  mcp-adapter=./mcp-adapter/cmd/mcp-adapter
  gateway=./gateway/cmd/gateway
)

build_in() { # build_in SRC_DIR VERSION COMMIT
  local src=$1 version=$2 commit=$3
  local ldflags="-s -w -X github.com/bmcis/knowledge/platform/version.Version=$version -X github.com/bmcis/knowledge/platform/version.Commit=$commit"
  local pkgs=()
  for b in "${binaries[@]}"; do pkgs+=("${b#*=}"); done
  # One `go build` for all: shared packages are compiled once, and most
  # are already in GOCACHE from this checkout's own build.
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
  echo "built $(ls "$out" | tr '\n' ' ')into $out ($version)"
}

case $which in
current)
  build_in "$root" "$(git describe --tags --always --dirty 2>/dev/null || echo dev)" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  ;;
previous)
  commit=$(tr -d '[:space:]' <deploy/upgrade/PREVIOUS_RELEASE)
  [[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "deploy/upgrade/PREVIOUS_RELEASE must hold one full commit hash, not '$commit'" >&2; exit 1; }
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    # A shallow clone (CI's may be) lacks older commits: fetch the one
    # needed, then the whole history, from origin.
    if [[ $(git rev-parse --is-shallow-repository) == true ]] && git remote get-url origin >/dev/null 2>&1; then
      echo "previous release $commit is not in this shallow clone; fetching it from origin" >&2
      git fetch --quiet --depth=1 origin "$commit" 2>/dev/null ||
        git fetch --quiet --unshallow origin 2>/dev/null || true
    fi
  fi
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    cat >&2 <<EOF
the previous release $commit (deploy/upgrade/PREVIOUS_RELEASE) is not in this
clone's history. Fetch it (git fetch --unshallow origin, or
git fetch origin $commit) or clone without --depth, then run make test-upgrade again.
EOF
    exit 1
  fi
  src=$(mktemp -d "${TMPDIR:-/tmp}/bmcis-previous-src-XXXXXX")
  trap 'rm -rf "$src"' EXIT
  git archive "$commit" | tar -x -C "$src"
  build_in "$src" "previous-${commit:0:7}" "${commit:0:7}"
  ;;
*)
  echo "usage: build.sh current|previous OUT_DIR" >&2
  exit 2
  ;;
esac
