#!/usr/bin/env bash
# `make run`: the main job on the local control plane. Installs the CRDs and the example objects
# (kwok nodes over two regions, sample latencies, an AppGroup, a NetworkTopology, an NRT), runs
# the operators as a local process and shows what they wrote; then bench/demo.py places a GPU
# workload and Online Boutique on real kubelet nodes (two of them with GPUs) with toposched and
# with kube-scheduler alone, side by side, and two DRA GPU pods on a fifth node where first fit
# puts the GPU off the pod's CPUs.
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

step "examples (from examples/): kwok nodes over two regions, latencies, an AppGroup, a NetworkTopology"
# A namespace an earlier run's clean-up is still deleting takes no new objects: let it go first.
if [[ $("${kubectl[@]}" get namespace "$namespace" -o 'jsonpath={.status.phase}' 2>/dev/null) == Terminating ]]; then
  echo "namespace $namespace is being deleted; waiting (at most 120 s)"
  "${kubectl[@]}" wait --for=delete --timeout=120s "namespace/$namespace"
fi
"${kubectl[@]}" create namespace "$namespace" --dry-run=client -o yaml | "${kubectl[@]}" apply -f -
"${kubectl[@]}" apply --server-side -f "$repo/examples/nodes.yaml"
"${kubectl[@]}" apply --server-side -n "$namespace" -f "$repo/examples/"

step "operators (a local process; log in .cluster/operator.log)"
TOPOSCHED_METRICS_PORT=0 TOPOSCHED_LEASE_NAMESPACE=$namespace \
  "$repo/.venv/bin/toposched" operator --namespace "$namespace" >"$repo/.cluster/operator.log" 2>&1 &
operator=$!
stop_operator() { kill "$operator" 2>/dev/null || true; wait "$operator" 2>/dev/null || true; }
trap stop_operator EXIT
"${kubectl[@]}" wait --for=condition=Ready --timeout=60s -n "$namespace" appgroup/online-boutique
# Ready or not, the table below says why.
"${kubectl[@]}" wait --for=condition=Ready --timeout=60s -n "$namespace" networktopology/net-topology || true
echo "placement order (status.topologyOrder by index):"
"${kubectl[@]}" get appgroup online-boutique -n "$namespace" \
  -o jsonpath='{range .status.topologyOrder[*]}{.index}{"\t"}{.workload.selector}{"\n"}{end}' | sort -n

step "kubectl get appgroups,networktopologies -n $namespace -o wide"
"${kubectl[@]}" get appgroups,networktopologies -n "$namespace" -o wide

step "conditions of the NetworkTopology (Degraded says what is missing)"
conditions='{range .status.conditions[*]}{.type}{"="}{.status}{" "}{.reason}{": "}{.message}{"\n"}{end}'
"${kubectl[@]}" get networktopology net-topology -n "$namespace" -o jsonpath="$conditions"

step "network costs the operator computed from the latencies (weight NetperfCosts)"
costs='{range .spec.weights[?(@.name=="NetperfCosts")].topologyList[*]}{.topologyKey}{"\n"}'
costs+='{range .originList[*]}{"  "}{.origin}{" ->"}{range .costList[*]}{" "}{.destination}{"="}{.networkCost}{end}{"\n"}{end}{end}'
"${kubectl[@]}" get networktopology net-topology -n "$namespace" -o jsonpath="$costs"

step "kubectl get nodes -l topology.kubernetes.io/region -L topology.kubernetes.io/region,topology.kubernetes.io/zone"
"${kubectl[@]}" get nodes -l topology.kubernetes.io/region -L topology.kubernetes.io/region,topology.kubernetes.io/zone

# Real kubelet nodes, the exporter, both schedulers, the GPU workloads and Online Boutique:
# bench/demo.py. As root, the node tools come from Debian packages when missing (make
# test-tools); otherwise the demo says why it cannot place pods and the rest of the output stands.
if [[ $(id -u) -eq 0 ]]; then
  "$repo/hack/install-node-tools.sh" || echo "run: the node tools could not be installed (see above)" >&2
fi
placed=yes
"$repo/.venv/bin/python" -m bench.demo --namespace "$namespace" --json "$repo/.cluster/demo.json" || {
  status=$?
  [[ $status -eq 3 ]] || exit "$status"
  placed=no
}

step "kubectl get noderesourcetopologies"
"${kubectl[@]}" get noderesourcetopologies

step "kubectl get appgroup online-boutique -n $namespace -o wide (the operator's view of the placed pods)"
"${kubectl[@]}" get appgroup online-boutique -n "$namespace" -o wide

stop_operator
cat <<EOF

The operators, the exporters and both schedulers have stopped: the statuses and NRTs above are
the last they wrote, and nothing updates them now (.venv/bin/toposched operator --namespace
$namespace runs the operators again). The cluster and its real nodes keep running, and so do
toposched's Online Boutique pods; make cluster-down stops everything.

Try:
  export KUBECONFIG=$KUBECONFIG PATH=$bin:\$PATH
  kubectl get networktopology net-topology -n $namespace -o yaml
  kubectl explain appgroup.spec.workloads.dependencies
  .venv/bin/toposched order examples/appgroup-online-boutique.yaml --algorithm TarjanSort
  .venv/bin/toposched netcost --networktopology examples/networktopology.yaml \\
      --configmap examples/netperf-metrics.yaml --nodes examples/nodes.yaml
  kubectl get nrt worker-1 -o yaml
EOF
if [[ $placed == yes ]]; then
  cat <<EOF
  kubectl get pods -n $namespace -o wide
  kubectl get nrt numa-1 -o yaml
  kubectl get pods -n $namespace -o yaml >pods.yaml; kubectl get pod frontend -n $namespace -o yaml >pod.yaml
  kubectl get nrt -o yaml >nrts.yaml; kubectl get nodes -o yaml >nodes.yaml
  kubectl get networktopology net-topology -n $namespace -o yaml >nt.yaml
  .venv/bin/toposched explain --pod pod.yaml --nrt nrts.yaml --nodes nodes.yaml --pods pods.yaml \\
      --appgroup examples/appgroup-online-boutique.yaml --networktopology nt.yaml
EOF
else
  echo "(no placement on real nodes: they need root and the node tools, which make test-tools installs)"
fi
