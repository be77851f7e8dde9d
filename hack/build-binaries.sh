#!/usr/bin/env bash
# Builds the control-plane binaries toposched tests against (and the kubelet of the local
# cluster's real nodes) from their official Go modules,
# at the versions pinned in hack/versions.env, into a cache outside the repo keyed by version.
#
#   hack/build-binaries.sh            build what is missing, print the bin directory
#   hack/build-binaries.sh --print    print the bin directory only (exit 1 if incomplete)
#
# Environment: TOPOSCHED_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/toposched).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${TOPOSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toposched}
bin="$cache/bin/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION"
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)
all=("${k8s_cmds[@]}" etcd kwok kwokctl helm)

log() { printf 'build-binaries: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

complete() {
  local b
  for b in "${all[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if [[ "${1:-}" == "--print" ]]; then
  complete || exit 1
  echo "$bin"
  exit 0
fi
if complete; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "no Go toolchain on PATH; install Go >= 1.26 (the Kubernetes $KUBERNETES_VERSION module requires it)"

mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" GOTOOLCHAIN=local

# A throwaway module per tool: the upstream main modules carry replace directives that
# `go install pkg@version` refuses, so we restate them against published versions.
workspace() {
  local dir="$cache/src/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$dir"
}

# The Kubernetes commands missing from the cache (all are built from one throwaway module).
missing_k8s() {
  local c
  for c in "${k8s_cmds[@]}"; do [[ -x "$bin/$c" ]] || echo "$c"; done
}

build_kubernetes() {
  local dir upstream minor staging_version date missing
  mapfile -t missing < <(missing_k8s)
  dir=$(workspace "kubernetes-$KUBERNETES_VERSION")
  log "fetching k8s.io/kubernetes@$KUBERNETES_VERSION"
  upstream=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
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
  (cd "$dir" && go mod tidy) || die "go mod tidy failed for Kubernetes $KUBERNETES_VERSION"

  minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  log "building ${missing[*]} (the first build takes a while)"
  local pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$dir" && go build -ldflags "$ld" -o "$bin/" "${pkgs[@]}")
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
  log "building etcd $ETCD_VERSION"
  (cd "$dir" && go mod tidy && go build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
}

# kwok and helm have no replace directives, so `go install` works as is.
build_with_install() {
  local version=$1 gobin name pkg
  shift
  gobin="$cache/src/gobin-$version"
  log "building $* at $version"
  for pkg in "$@"; do
    GOBIN="$gobin" go install -ldflags "-s -w" "$pkg@$version"
    name=${pkg##*/}
    [[ $name == v3 ]] && name=helm
    install -m 0755 "$gobin/$name" "$bin/$name"
  done
}

started=$SECONDS
[[ -z "$(missing_k8s)" ]] || build_kubernetes
[[ -x "$bin/etcd" ]] || build_etcd
[[ -x "$bin/kwok" && -x "$bin/kwokctl" ]] ||
  build_with_install "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
[[ -x "$bin/helm" ]] || build_with_install "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
complete || die "some binaries are missing from $bin"
log "built in $((SECONDS - started)) s"
echo "$bin"
