#!/usr/bin/env bash
# Installs (or upgrades) the chart on the local cluster's real kubelet nodes from the images
# `make images` built: imports .images/*.tar into every real node's containerd, applies the CRDs
# (kept out of the release, as `make run` and the tests apply them too), then
# `helm upgrade --install` with hack/chart-local-cluster.yaml and the apiserver's address.
#
#   hack/install-chart-local.sh [-n NAMESPACE] [RELEASE] [-- more helm arguments]
#     defaults: namespace toposched-system, release toposched
#
# Needs root (ctr), `make cluster REAL_NODES=N` and `make images`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
namespace=toposched-system
release=toposched
while (($#)); do
  case "$1" in
    -n | --namespace) namespace=${2:?-n needs a namespace}; shift 2 ;;
    --) shift; break ;;
    -*) echo "usage: $0 [-n NAMESPACE] [RELEASE] [-- helm arguments]" >&2; exit 2 ;;
    *) release=$1; shift ;;
  esac
done

die() { echo "install-chart-local: $*" >&2; exit 1; }
bin=$("$repo/hack/build-binaries.sh" --print)
[[ -x "$bin/helm" ]] || die "the pinned binaries are not built: make binaries"
export KUBECONFIG=${KUBECONFIG:-$repo/.cluster/kubeconfig}
[[ -f "$KUBECONFIG" ]] || die "no local cluster: make cluster REAL_NODES=2"
server=$(sed -n 's|^ *server: https://||p' "$KUBECONFIG" | head -1)
[[ -n "$server" ]] || die "no https server in $KUBECONFIG"

# shellcheck source=versions.env
source "$repo/hack/versions.env"
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$repo/toposched/__init__.py")
images=${IMAGES_DIR:-$repo/.images}
archives=(
  "$images/toposched-operator-$version.tar"
  "$images/toposched-exporter-$version.tar"
  "$images/toposched-kube-scheduler-$KUBERNETES_VERSION.tar"
)
for a in "${archives[@]}"; do [[ -f "$a" ]] || die "no ${a#"$repo"/}: make images"; done

sockets=("$repo"/.cluster/nodes/*/containerd/containerd.sock)
[[ -S "${sockets[0]}" ]] || die "no real node runs: make cluster REAL_NODES=2"
for socket in "${sockets[@]}"; do
  node=$(basename "$(dirname "$(dirname "$socket")")")
  for a in "${archives[@]}"; do
    ctr --address "$socket" --namespace k8s.io images import "$a" >/dev/null || die "importing $a into $node failed"
  done
  echo "install-chart-local: images imported into $node"
done

"$bin/kubectl" apply --server-side -f "$repo/crds/" >/dev/null
"$bin/helm" upgrade --install "$release" "$repo/charts/toposched" -n "$namespace" --create-namespace \
  --set crds.install=false -f "$repo/hack/chart-local-cluster.yaml" \
  --set "hostNetwork.apiServer=$server" "$@"
