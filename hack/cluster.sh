#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver (RBAC, admission webhooks, service-account
# tokens), kube-controller-manager, kube-scheduler and the kwok controller, all as local
# processes launched by kwokctl's binary runtime from the binaries hack/build-binaries.sh builds.
# Optionally real kubelet nodes with fake NUMA topologies (testkit.realnode; root only).
#
#   hack/cluster.sh up       start it, or reuse it when it is already up (idempotent);
#                            with REAL_NODES=N (default 0) also have real nodes realnode-0..N-1
#   hack/cluster.sh down     stop the real nodes, then exactly the processes `up` started
#                            (kwokctl's pid files); nothing of either is left behind
#   hack/cluster.sh status   say whether it is up, and list the real nodes
#
# State (kubeconfig, pki, etcd data, logs, pid files, real nodes) lives in .cluster/ of the repo.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$repo/.cluster"
name=toposched
kubeconfig="$state/kubeconfig"
export KWOK_WORKDIR="$state/kwok"
cluster_dir="$KWOK_WORKDIR/clusters/$name"

real_nodes=${REAL_NODES:-0}
# The configuration the cluster was created with: kwokctl keeps it, so a changed hack/kwokctl.yaml
# takes effect only in a new cluster.
config_stamp="$state/kwokctl.yaml.sha256"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The Python that runs testkit.realnode (stdlib + PyYAML): the repo's venv when there is one.
realnode() {
  local py=python3
  [[ -x "$repo/.venv/bin/python" ]] && py="$repo/.venv/bin/python"
  (cd "$repo" && "$py" -m testkit.realnode "$@")
}

# Anything real nodes may have left: their state dir or their cgroups.
have_real_nodes() {
  [[ -d "$state/nodes" ]] || compgen -G "/sys/fs/cgroup/*/toposched-realnode" >/dev/null ||
    [[ -d /sys/fs/cgroup/toposched-realnode ]]
}

start_real_nodes() {
  [[ $real_nodes =~ ^[0-9]+$ ]] || die "REAL_NODES must be a number, not '$real_nodes'"
  ((real_nodes > 0)) || return 0
  realnode check || die "real nodes need root and the node tools (make test-tools) and binaries (make binaries)"
  log "starting $real_nodes real kubelet node(s) (logs in $state/nodes/<name>/logs)"
  realnode ensure "$real_nodes" || die "could not start the real nodes (see above)"
}

binaries() {
  bin=$("$repo/hack/build-binaries.sh") || die "could not build the control-plane binaries (see above)"
  kwokctl=("$bin/kwokctl" --name "$name")
  kubectl=("$bin/kubectl" --kubeconfig "$kubeconfig")
}

ready() {
  [[ -f "$kubeconfig" ]] && [[ "$(timeout 5 "${kubectl[@]}" get --raw /readyz 2>/dev/null)" == ok ]] && components_alive
}

# Every process kwokctl started is still there (a component that exited is not restarted by it).
components_alive() {
  local pidfile
  for pidfile in "$cluster_dir"/pids/*.pid; do
    [[ -f $pidfile ]] || continue
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { log "$(basename "$pidfile" .pid) is not running"; return 1; }
  done
}

# The components kwokctl started whose process is gone (pid files; a zombie counts as gone). The
# scheduler and controller-manager exit on lost leadership while the apiserver stays ready.
dead_components() {
  local pid_file pid
  for pid_file in "$cluster_dir"/pids/*.pid; do
    [[ -e "$pid_file" ]] || continue
    pid=$(<"$pid_file")
    if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! kill -0 "$pid" 2>/dev/null ||
      [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]]; then
      basename "$pid_file" .pid
    fi
  done
}

healthy() {
  ready && [[ -z "$(dead_components)" ]]
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

config_hash() { sha256sum <"$repo/hack/kwokctl.yaml" | cut -d' ' -f1; }

create() {
  log "creating the cluster (logs in $cluster_dir/logs)"
  mkdir -p "$state"
  config_hash >"$config_stamp"
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
  if [[ -d "$cluster_dir" && "$(cat "$config_stamp" 2>/dev/null)" != "$(config_hash)" ]]; then
    log "hack/kwokctl.yaml changed since the cluster was created; creating it again"
    down
  fi
  if [[ -d "$cluster_dir" ]]; then
    write_kubeconfig 2>/dev/null || true
    if healthy; then
      start_real_nodes
      usage_hint
      return 0
    fi
    # A previous run was stopped or died half-way, or some component exited: stop what is left of
    # it (pid files) and start it again with its data; if that fails, start over.
    local dead
    dead=$(dead_components | tr '\n' ' ')
    log "a previous cluster is not healthy${dead:+ (not running: $dead)}; restarting it"
    "${kwokctl[@]}" stop cluster >"$state/stop.log" 2>&1 || true
    if "${kwokctl[@]}" start cluster --timeout 60s >"$state/start.log" 2>&1 && write_kubeconfig && wait_ready 30; then
      start_real_nodes
      usage_hint
      return 0
    fi
    log "restart failed (see $state/start.log); deleting it and creating a new one"
    "${kwokctl[@]}" delete cluster --kubeconfig "$state/kwokctl-kubeconfig" >"$state/delete.log" 2>&1 || true
  fi
  create
  write_kubeconfig
  wait_ready 60 || die "the apiserver did not become ready; logs in $cluster_dir/logs"
  start_real_nodes
  usage_hint
}

down() {
  # Real nodes first, while the apiserver can still take their Node objects away.
  if have_real_nodes; then
    realnode down || die "could not remove the real nodes; see above (retry: make cluster-down)"
  fi
  if [[ ! -d "$cluster_dir" ]]; then
    log "no local cluster to stop"
    rm -f "$kubeconfig"
    return 0
  fi
  binaries
  local pids="" pid_file
  for pid_file in "$cluster_dir"/pids/*.pid; do  # kwokctl's pid files end without a newline
    [[ -f "$pid_file" ]] && pids+=" $(<"$pid_file")"
  done
  "${kwokctl[@]}" delete cluster --kubeconfig "$state/kwokctl-kubeconfig" >"$state/delete.log" 2>&1 ||
    die "kwokctl could not delete the cluster; see $state/delete.log"
  # kwokctl does not wait for a component that ignores SIGTERM (a kube-apiserver with watches
  # open can take minutes): one left running would later talk to whichever process takes its
  # etcd port. Anything of this cluster still running now is killed.
  local pid
  for pid in $pids; do
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$cluster_dir/"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -f "$kubeconfig" "$state/kwokctl-kubeconfig" "$config_stamp"
  log "stopped"
}

status() {
  if [[ ! -d "$cluster_dir" ]]; then
    echo "down"
    return 1
  fi
  binaries
  local dead
  dead=$(dead_components | tr '\n' ' ')
  if ! ready; then
    echo "not ready${dead:+ (not running: $dead)} (run: make cluster)"
    return 1
  elif [[ -n "$dead" ]]; then
    echo "degraded: not running: $dead(run: make cluster)"
    return 1
  fi
  echo "up ($kubeconfig)"
  if have_real_nodes; then
    echo "real nodes:"
    realnode list | sed 's/^/  /'
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: $0 up|down|status" ;;
esac
