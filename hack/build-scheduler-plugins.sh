#!/usr/bin/env bash
# Builds the scheduler-plugins scheduler (cmd/scheduler of sigs.k8s.io/scheduler-plugins, the
# system toposched is compared with in `make bench`) from its Go module at the version pinned in
# hack/versions.env, into the same cache as hack/build-binaries.sh. Prints the binary's path.
#
#   hack/build-scheduler-plugins.sh            build it when missing, print its path
#   hack/build-scheduler-plugins.sh --print    print its path only (exit 1 if not built)
#
# Environment: TOPOSCHED_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/toposched).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${TOPOSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toposched}
out="$cache/bin/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION/kube-scheduler"

log() { printf 'build-scheduler-plugins: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi
[[ "${1:-}" == "--print" ]] && exit 1
command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH"

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath" GOTOOLCHAIN=local
dir="$cache/src/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION"
rm -rf "$dir"
mkdir -p "$dir" "$(dirname "$out")"
module=sigs.k8s.io/scheduler-plugins

# ``version`` of ``mod`` if the module proxy serves it, else the newest earlier patch release it
# serves (some staging modules, e.g. k8s.io/cluster-bootstrap, lack the latest patches there),
# else nothing.
available() {
  local mod=$1 version=$2 base patch
  base=${version%.*}
  patch=${version##*.}
  while ((patch >= 0)); do
    if (cd "$dir/probe" && go mod download -json "$mod@$base.$patch" 2>/dev/null | grep -q '"GoMod"'); then
      [[ $patch == "${version##*.}" ]] || log "$mod $version is not served; using $base.$patch"
      echo "$base.$patch"
      return
    fi
    patch=$((patch - 1))
  done
  log "no $base.x release of $mod is served; its replace is left out (nothing may need it)"
}
log "fetching $module@$SCHEDULER_PLUGINS_VERSION"
mkdir -p "$dir/probe"
echo "module toposched.invalid/probe" >"$dir/probe/go.mod"
upstream=$(cd "$dir/probe" && go mod download -json "$module@$SCHEDULER_PLUGINS_VERSION" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f "$upstream" ]] || die "could not download the $module $SCHEDULER_PLUGINS_VERSION go.mod"
# Its go.mod pins every k8s.io module with replace directives, which `go install pkg@version`
# refuses: a throwaway module restates them (they are all published versions, no local paths).
replaces=$(sed -n 's#^[[:space:]]*\(replace \)\{0,1\}\(k8s.io/[a-z0-9-]*\) => k8s.io/[a-z0-9-]* \(v[0-9.]*\)$#\2 \3#p' "$upstream" |
  while read -r mod version; do
    served=$(available "$mod" "$version")
    [[ -z $served ]] || printf '\t%s => %s %s\n' "$mod" "$mod" "$served"
  done)
{
  echo "module toposched.invalid/scheduler-plugins-build"
  echo
  grep -E '^(go|godebug) ' "$upstream"
  echo
  echo "require $module $SCHEDULER_PLUGINS_VERSION"
  echo
  echo "replace ("
  echo "$replaces"
  echo ")"
} >"$dir/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/scheduler"\n' "$module" >"$dir/tools.go"
(cd "$dir" && go mod tidy) || die "go mod tidy failed for $module $SCHEDULER_PLUGINS_VERSION"
kube=$(sed -n 's#^[[:space:]]*k8s.io/kubernetes => k8s.io/kubernetes \(v[0-9.]*\)$#\1#p' "$upstream")
minor=${kube#v1.}
minor=${minor%%.*}
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
started=$SECONDS
log "building $module/cmd/scheduler (Kubernetes $kube libraries; the first build takes a while)"
(cd "$dir" && go build -ldflags "$ld" -o "$out" "$module/cmd/scheduler")
log "built in $((SECONDS - started)) s"
echo "$out"
