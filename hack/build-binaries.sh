#!/usr/bin/env bash
# Builds the control-plane binaries toposched tests against (and the kubelet of the local
# cluster's real nodes) from their official Go modules,
# at the versions pinned in hack/versions.env, into a cache outside the repo keyed by version.
#
#   hack/build-binaries.sh            build what is missing, print the bin directory
#   hack/build-binaries.sh --print    print the bin directory only (exit 1 if incomplete)
#
# stdout is the bin directory alone (callers do `bin=$(hack/build-binaries.sh)`). While building,
# stderr gets one line per binary (`[3/9] kubelet`, with the time so far); the Go tool's own output
# (module downloads, compiler messages) goes to a log under the cache, which a failed build names.
#
# Environment: TOPOSCHED_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/toposched).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${TOPOSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toposched}
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION"
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)
# toposched's own Go helpers (helpers/<name>/, linked against the pinned Kubernetes libraries), as
# toposched-<name>, built per hash of their sources into a directory of its own beside the pinned
# binaries (linked in): that directory is the one printed, so checkouts of different helper
# sources never take each other's helpers.
helpers=(dra-allocate)
all=("${k8s_cmds[@]}" etcd kwok kwokctl helm "${helpers[@]/#/toposched-}")
repo=$(cd -P "$here/.." && pwd)  # -P: a checkout may link to this hack/ (the chaos run's own plane)
sources=$(cd "$repo/helpers" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' |
  LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
out="$bin/helpers-$sources"

log() { printf 'build-binaries: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Those of the named binaries missing from the cache (a helper: built from these sources), one a line.
missing() {
  local b
  for b in "$@"; do
    if [[ $b == toposched-* && ! -x "$out/$b" ]] || [[ $b != toposched-* && ! -x "$bin/$b" ]]; then
      echo "$b"
    fi
  done
}

# Every binary built, and linked into the printed directory.
complete() {
  local b
  [[ -z "$(missing "${all[@]}")" ]] || return 1
  for b in "${all[@]}"; do
    [[ -x "$out/$b" ]] || return 1
  done
}

link() {
  local b
  mkdir -p "$out"
  for b in "${all[@]}"; do
    [[ $b == toposched-* ]] || ln -sfn "../$b" "$out/$b"
  done
}

if [[ "${1:-}" == "--print" ]]; then
  complete || exit 1
  echo "$out"
  exit 0
fi
if complete; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "no Go toolchain on PATH; install Go >= 1.26 (the Kubernetes $KUBERNETES_VERSION module requires it)"

mkdir -p "$bin" "$cache/logs"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" GOTOOLCHAIN=local
build_log="$cache/logs/build-binaries-$(date -u +%Y%m%dT%H%M%SZ)-$$.log"
started=$SECONDS
step=0
total=0

elapsed() {
  local s=$((SECONDS - started))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# One line per binary on stderr, numbered among those this run builds.
progress() {
  step=$((step + 1))
  log "[$step/$total] $1 ($(elapsed) so far)"
}

# Says what failed with the end of the Go tool's output, and where the rest of it is.
fail() {
  log "$1 failed after $(elapsed); the Go tool's last lines:"
  tail -n 25 "$build_log" | sed 's/^/    /' >&2
  die "$1 failed; the Go tool's whole output is in $build_log"
}

# Runs a command with its output in the log; a failure ends the build through fail.
quietly() {
  local what=$1
  shift
  printf '$ %s\n' "$*" >>"$build_log"
  "$@" >>"$build_log" 2>&1 || fail "$what"
}

# A throwaway module per tool: the upstream main modules carry replace directives that
# `go install pkg@version` refuses, so we restate them against published versions.
workspace() {
  local dir="$cache/src/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$dir"
}


build_kubernetes() {
  local dir upstream json minor staging_version date cmds c
  mapfile -t cmds < <(missing "${k8s_cmds[@]}")  # all built from one throwaway module
  dir=$(workspace "kubernetes-$KUBERNETES_VERSION")
  log "fetching the Go modules of Kubernetes $KUBERNETES_VERSION ($(elapsed) so far)"
  printf '$ go -C %s mod download -json k8s.io/kubernetes@%s\n' "$dir" "$KUBERNETES_VERSION" >>"$build_log"
  if ! json=$(go -C "$dir" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" 2>>"$build_log"); then
    [[ -z "$json" ]] || printf '%s\n' "$json" >>"$build_log"  # its error, when the module proxy gave one
    fail "fetching k8s.io/kubernetes@$KUBERNETES_VERSION"
  fi
  upstream=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$json")
  [[ -f "$upstream" ]] || die "could not download the k8s.io/kubernetes $KUBERNETES_VERSION go.mod"
  # Staging modules are published as v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
  staging_version="v0.${KUBERNETES_VERSION#v1.}"
  {
    echo "module toposched.invalid/kubernetes-build"
    echo
    grep -E '^(go|godebug) ' "$upstream"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$upstream"
    echo ")"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for c in "${k8s_cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ")"
  } >"$dir/tools.go"
  quietly "go mod tidy for Kubernetes $KUBERNETES_VERSION" go -C "$dir" mod tidy

  minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  # One command at a time, for the progress lines; the build cache shares what they have in common.
  for c in "${cmds[@]}"; do
    progress "$c"
    quietly "building $c $KUBERNETES_VERSION" go -C "$dir" build -ldflags "$ld" -o "$bin/$c" "k8s.io/kubernetes/cmd/$c"
  done
}

build_etcd() {
  local dir
  dir=$(workspace "etcd-$ETCD_VERSION")
  {
    echo "module toposched.invalid/etcd-build"
    echo
    echo "go 1.26"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo
    echo "replace ("
    for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
      echo "	go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"
    done
    echo ")"
  } >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$dir/tools.go"
  progress etcd
  quietly "go mod tidy for etcd $ETCD_VERSION" go -C "$dir" mod tidy
  quietly "building etcd $ETCD_VERSION" go -C "$dir" build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

# kwok and helm have no replace directives, so `go install` works as is.
build_with_install() {
  local version=$1 gobin name pkg
  shift
  gobin="$cache/src/gobin-$version"
  for pkg in "$@"; do
    name=${pkg##*/}
    [[ $name == v3 ]] && name=helm
    [[ -x "$bin/$name" ]] && continue
    progress "$name"
    quietly "building $name $version" env GOBIN="$gobin" go install -ldflags "-s -w" "$pkg@$version"
    install -m 0755 "$gobin/$name" "$bin/$name"
  done
}

build_helpers() {
  local h
  for h in $(missing "${helpers[@]/#/toposched-}"); do
    progress "$h"
    mkdir -p "$out"
    quietly "building $h" go -C "$repo/helpers/${h#toposched-}" build -mod=readonly -ldflags "-s -w" -o "$out/$h.tmp" .
    mv "$out/$h.tmp" "$out/$h"
  done
}

mapfile -t todo < <(missing "${all[@]}")
total=${#todo[@]}
log "binaries to build: $total of ${#all[@]} (versions in hack/versions.env); the Go tool's output goes to $build_log"
[[ -z "$(missing "${k8s_cmds[@]}")" ]] || build_kubernetes
[[ -x "$bin/etcd" ]] || build_etcd
build_with_install "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
build_with_install "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
build_helpers
link
complete || die "some binaries are missing from $out"
log "built $total of ${#all[@]} binaries in $(elapsed)"
echo "$out"
