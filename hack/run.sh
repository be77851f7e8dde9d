#!/usr/bin/env bash
# `make run`: the main job on the local control plane. Installs the CRDs and the example
# objects and shows them the way a user would look at them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$("$repo/hack/build-binaries.sh")
export KUBECONFIG="$repo/.cluster/kubeconfig"
kubectl=("$bin/kubectl")
namespace=toposched-demo

step() { printf '\n== %s\n' "$*"; }

step "control plane"
"${kubectl[@]}" get --raw /readyz && echo

step "CRDs (from crds/)"
"${kubectl[@]}" apply --server-side -f "$repo/crds/"
"${kubectl[@]}" wait --for=condition=Established --timeout=60s -f "$repo/crds/"

step "examples (from examples/) in namespace $namespace"
"${kubectl[@]}" create namespace "$namespace" --dry-run=client -o yaml | "${kubectl[@]}" apply -f -
"${kubectl[@]}" apply --server-side -n "$namespace" -f "$repo/examples/"

step "AppGroup operator (log in .cluster/operator.log)"
TOPOSCHED_METRICS_PORT=0 TOPOSCHED_LEASE_NAMESPACE=$namespace \
  "$repo/.venv/bin/toposched" operator --namespace "$namespace" >"$repo/.cluster/operator.log" 2>&1 &
operator=$!
trap 'kill "$operator" 2>/dev/null || true; wait "$operator" 2>/dev/null || true' EXIT
"${kubectl[@]}" wait --for=condition=Ready --timeout=60s -n "$namespace" appgroup/online-boutique
echo "placement order (status.topologyOrder by index):"
"${kubectl[@]}" get appgroup online-boutique -n "$namespace" \
  -o jsonpath='{range .status.topologyOrder[*]}{.index}{"\t"}{.workload.selector}{"\n"}{end}' | sort -n

step "kubectl get appgroups,networktopologies -n $namespace"
"${kubectl[@]}" get appgroups,networktopologies -n "$namespace"
step "kubectl get noderesourcetopologies"
"${kubectl[@]}" get noderesourcetopologies

cat <<EOF

Try:
  export KUBECONFIG=$KUBECONFIG PATH=$bin:\$PATH
  kubectl explain appgroup.spec.workloads.dependencies
  .venv/bin/toposched order examples/appgroup-online-boutique.yaml --algorithm TarjanSort
  kubectl get nrt worker-1 -o yaml
EOF
