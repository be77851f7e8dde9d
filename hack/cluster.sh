#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver (RBAC, admission webhooks, service-account
# tokens), kube-controller-manager, kube-scheduler and the kwok controller, all as local
# processes launched by kwokctl's binary runtime from the binaries hack/build-binaries.sh builds.
#
#   hack/cluster.sh up       start it, or reuse it when it is already up (idempotent)
#   hack/cluster.sh down     stop exactly the processes `up` started (kwokctl's pid files)
#   hack/cluster.sh status   say whether it is up
#
# State (kubeconfig, pki, etcd data, logs, pid files) lives in .cluster/ of the repo.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$repo/.cluster"
name=toposched
kubeconfig="$state/kubeconfig"
export KWOK_WORKDIR="$state/kwok"
cluster_dir="$KWOK_WORKDIR/clusters/$name"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

binaries() {
  bin=$("$repo/hack/build-binaries.sh") || die "could not build the control-plane binaries (see above)"
  kwokctl=("$bin/kwokctl" --name "$name")
  kubectl=("$bin/kubectl" --kubeconfig "$kubeconfig")
}

ready() {
  [[ -f "$kubeconfig" ]] && [[ "$(timeout 5 "${kubectl[@]}" get --raw /readyz 2>/dev/null)" == ok ]]
}

wait_ready() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    ready && return 0
    sleep 1
  done
  return 1
}

# kwokctl's own copy is authoritative; rewriting ours on every `up` heals a stale kubeconfig.
write_kubeconfig() {
  mkdir -p "$state"
  "${kwokctl[@]}" get kubeconfig >"$kubeconfig.tmp" && mv "$kubeconfig.tmp" "$kubeconfig"
}

usage_hint() {
  cat <<EOF
The local control plane is up (Kubernetes $("${kubectl[@]}" version -o json 2>/dev/null |
    sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1)).
  export KUBECONFIG=$kubeconfig
  export PATH=$bin:\$PATH      # kubectl, helm and kwokctl at the pinned versions
  kubectl get --raw /readyz
Stop it with: make cluster-down
EOF
}

create() {
  log "creating the cluster (logs in $cluster_dir/logs)"
  mkdir -p "$state"
  "${kwokctl[@]}" create cluster \
    --runtime binary \
    --kube-apiserver-binary "$bin/kube-apiserver" \
    --kube-controller-manager-binary "$bin/kube-controller-manager" \
    --kube-scheduler-binary "$bin/kube-scheduler" \
    --kwok-controller-binary "$bin/kwok" \
    --etcd-binary "$bin/etcd" \
    --kube-authorization \
    --kube-admission \
    --config "$repo/hack/kwokctl.yaml" \
    --kubeconfig "$state/kwokctl-kubeconfig" \
    --wait 120s >"$state/create.log" 2>&1 || {
    tail -20 "$state/create.log" >&2
    die "kwokctl could not create the cluster; full output in $state/create.log"
  }
}

up() {
  binaries
  if [[ -d "$cluster_dir" ]]; then
    write_kubeconfig 2>/dev/null || true
    if ready; then
      usage_hint
      return 0
    fi
    # A previous run was stopped or died half-way: stop what is left of it (pid files) and start
    # it again with its data; if that fails, start over.
    log "a previous cluster is not ready; restarting it"
    "${kwokctl[@]}" stop cluster >"$state/stop.log" 2>&1 || true
    if "${kwokctl[@]}" start cluster --timeout 60s >"$state/start.log" 2>&1 && write_kubeconfig && wait_ready 30; then
      usage_hint
      return 0
    fi
    log "restart failed (see $state/start.log); deleting it and creating a new one"
    "${kwokctl[@]}" delete cluster --kubeconfig "$state/kwokctl-kubeconfig" >"$state/delete.log" 2>&1 || true
  fi
  create
  write_kubeconfig
  wait_ready 60 || die "the apiserver did not become ready; logs in $cluster_dir/logs"
  usage_hint
}

down() {
  if [[ ! -d "$cluster_dir" ]]; then
    log "no local cluster to stop"
    rm -f "$kubeconfig"
    return 0
  fi
  binaries
  "${kwokctl[@]}" delete cluster --kubeconfig "$state/kwokctl-kubeconfig" >"$state/delete.log" 2>&1 ||
    die "kwokctl could not delete the cluster; see $state/delete.log"
  rm -f "$kubeconfig" "$state/kwokctl-kubeconfig"
  log "stopped"
}

status() {
  if [[ ! -d "$cluster_dir" ]]; then
    echo "down"
    return 1
  fi
  binaries
  if ready; then
    echo "up ($kubeconfig)"
  else
    echo "not ready (run: make cluster)"
    return 1
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: $0 up|down|status" ;;
esac
