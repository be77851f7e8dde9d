#!/usr/bin/env bash
# Smoke tests of the images `make images` built (run it first). Each command runs the way a
# restricted pod runs it, without a container runtime: in the image's root file system, mounted
# read-only, in its own mount and PID namespaces, with the image's entry point, environment and
# user, no capabilities (the bounding set is emptied) and no_new_privs.
#
#   hack/smoke-images.sh [--sysfs-snapshot FILE.tar.gz] [--no-ctr]
#
# Checks:
#   both images     `toposched --help`, `--version` and every command's `--help`, as the image's user
#   operator        the image's user is 65532:65532 (non-root); the root file system is read-only
#                   (a write to /tmp fails with EROFS); no capabilities; kube-scheduler's DRA
#                   allocator (toposched-dra-allocate) answers
#   exporter        root without capabilities on a read-only root (as in the chart);
#                   `toposched nrt --sysfs /host/sys` on a two-NUMA-node sysfs fixture prints a
#                   NodeResourceTopology with both zones (the chart mounts the host's /sys at
#                   /host/sys); netperf and netserver start as uid 65532
#   kube-scheduler  `kube-scheduler --version` as 65532, when that image was built
#   archives        when containerd's `ctr` is installed (hack/install-image-tools.sh --ctr) and
#                   --no-ctr is not given: each .images/*.tar imports into a private containerd
#                   (its own socket and state in a temporary directory) under namespace k8s.io,
#                   and, with runc, the operator runs there read-only as 65532 and the exporter
#                   prints the fixture's NRT
#
# --sysfs-snapshot: also run `toposched nrt` on a real machine's sysfs snapshot (a tar.gz holding
# sys/ and proc/, as the ones the ghw project publishes).
#
# Ends with the line "N passed, N failed"; exits non-zero when a check failed.
set -euo pipefail
# shellcheck source=images-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/images-lib.sh"

snapshot=""
use_ctr=1
while (($#)); do
  case "$1" in
    --sysfs-snapshot)
      snapshot=${2:?--sysfs-snapshot needs a file}
      shift 2
      ;;
    --no-ctr)
      use_ctr=0
      shift
      ;;
    *) die "usage: $0 [--sysfs-snapshot FILE.tar.gz] [--no-ctr]" ;;
  esac
done
[[ -z "$snapshot" || -f "$snapshot" ]] || die "no such file: $snapshot"

need_buildah
command -v python3 >/dev/null 2>&1 || die "needs python3 on this machine (the launcher drops privileges)"
command -v unshare >/dev/null 2>&1 || die "needs unshare (util-linux)"
# shellcheck source=versions.env
source "$repo/hack/versions.env"
version=$(toposched_version)
out=${IMAGES_DIR:-$repo/.images}
operator="localhost/toposched-operator:$version"
exporter="localhost/toposched-exporter:$version"
scheduler="localhost/toposched-kube-scheduler:$KUBERNETES_VERSION"
for image in "$operator" "$exporter"; do
  image_exists "$image" || die "$image is not built; run make images"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/toposched-smoke.XXXXXX")
containers=()
containerd_pid=""
cleanup() {
  local c
  if [[ -n "$containerd_pid" ]]; then
    kill "$containerd_pid" 2>/dev/null || true
    wait "$containerd_pid" 2>/dev/null || true
  fi
  for c in "${containers[@]}"; do bah rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
pass() {
  passed=$((passed + 1))
  printf 'ok     %s\n' "$*"
}
fail() {
  failed=$((failed + 1))
  printf 'FAILED %s\n' "$*"
}

# chroot, no capabilities, no_new_privs, the image's user, then exec with the image's environment.
cat >"$work/launch.py" <<'PY'
import ctypes
import os
import sys

root, workdir, user, *rest = sys.argv[1:]
split = rest.index("--")
env = dict(e.split("=", 1) for e in rest[:split])
argv = rest[split + 1 :]
uid, _, gid = user.partition(":")
uid, gid = int(uid or 0), int(gid or uid or 0)
env.setdefault("HOME", "/root" if uid == 0 else "/")
libc = ctypes.CDLL(None, use_errno=True)
last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
os.chroot(root)
os.chdir(workdir or "/")
for cap in range(last_cap + 1):
    libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: capabilities: drop: [ALL]
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: allowPrivilegeEscalation: false
    sys.exit("cannot set no_new_privs")
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
program = argv[0]
if "/" not in program:
    for d in env.get("PATH", "/usr/bin:/bin").split(":"):
        if os.access(os.path.join(d, program), os.X_OK):
            program = os.path.join(d, program)
            break
os.execve(program, argv, env)
PY

# mount an image: a throwaway working container, with the mount points a runtime would provide.
declare -A root_of
prepare() {
  local image=$1 c root
  c=$(bah from --pull=never --quiet "$image")
  containers+=("$c")
  root=$(bah mount "$c")
  mkdir -p "$root/dev" "$root/proc" "$root/host"
  root_of[$image]=$root
}

# run IMAGE [--user U:G] [--host DIR] [--entrypoint] -- ARGS...: ARGS run after the image's
# entry point (with --entrypoint) or as the command itself; DIR is mounted read-only at /host.
run() {
  local image=$1 user host="" entry=0
  shift
  user=$(bah inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
  while [[ $1 != -- ]]; do
    case "$1" in
      --user) user=$2; shift 2 ;;
      --host) host=$2; shift 2 ;;
      --entrypoint) entry=1; shift ;;
      *) die "run: unknown option $1" ;;
    esac
  done
  shift
  [[ -z "$user" || "$user" =~ ^[0-9]+(:[0-9]+)?$ ]] || die "$image: non-numeric user '$user'"
  local envs=() cmd=() workdir
  mapfile -t envs < <(bah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$image" | sed '/^$/d')
  if ((entry)); then
    mapfile -t cmd < <(bah inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' "$image" | sed '/^$/d')
  fi
  workdir=$(bah inspect --type image --format '{{.OCIv1.Config.WorkingDir}}' "$image")
  # shellcheck disable=SC2016
  unshare --mount --pid --fork --kill-child -- bash -euc '
    root=$1 host=$2 launcher=$3
    shift 3
    mount --make-rprivate /
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount -t tmpfs -o nosuid,mode=0755 tmpfs "$root/dev"
    for n in null zero full random urandom; do
      touch "$root/dev/$n"
      mount --bind "/dev/$n" "$root/dev/$n"
    done
    if [[ -n "$host" ]]; then mount --bind -o ro "$host" "$root/host"; mount -o remount,bind,ro "$root/host"; fi
    mount -o remount,bind,ro "$root"
    exec python3 "$launcher" "$root" "$@"
  ' _ "${root_of[$image]}" "$host" "$work/launch.py" "$workdir" "$user" "${envs[@]}" -- "${cmd[@]}" "$@"
}

# check NAME EXPECTED-REGEX COMMAND...: passes when COMMAND exits 0 and its output matches.
check() {
  local name=$1 expect=$2 output rc=0
  shift 2
  output=$("$@" 2>&1) || rc=$?
  if ((rc == 0)) && grep -Eq -- "$expect" <<<"$output"; then
    pass "$name"
  else
    fail "$name (exit $rc)"
    head -c 2000 <<<"$output" | sed 's/^/       | /'
  fi
}

# A sysfs tree of a two-socket machine: 2 NUMA nodes x 8 CPUs, 16 GiB, 2Mi and 1Gi hugepages,
# a 25G NIC on node 0.
write_fixture() {
  local sys=$1/sys n
  mkdir -p "$sys/devices/system/cpu" "$sys/devices/system/node" "$1/proc"
  echo 0-15 >"$sys/devices/system/cpu/online"
  echo 0-1 >"$sys/devices/system/node/online"
  echo 0-1 >"$sys/devices/system/node/possible"
  for n in 0 1; do
    local d="$sys/devices/system/node/node$n"
    mkdir -p "$d/hugepages/hugepages-2048kB" "$d/hugepages/hugepages-1048576kB"
    echo "$((n * 4))-$((n * 4 + 3)),$((n * 4 + 8))-$((n * 4 + 11))" >"$d/cpulist"
    printf 'Node %d MemTotal:       16777216 kB\nNode %d MemFree:         8388608 kB\n' "$n" "$n" >"$d/meminfo"
    if ((n == 0)); then echo "10 21" >"$d/distance"; else echo "21 10" >"$d/distance"; fi
    echo 512 >"$d/hugepages/hugepages-2048kB/nr_hugepages"
    echo 512 >"$d/hugepages/hugepages-2048kB/free_hugepages"
    echo 2 >"$d/hugepages/hugepages-1048576kB/nr_hugepages"
    echo 2 >"$d/hugepages/hugepages-1048576kB/free_hugepages"
  done
  mkdir -p "$sys/class/net/ens1f0/device" "$sys/class/net/lo" "$sys/bus/pci/devices/0000:3b:00.0"
  echo 25000 >"$sys/class/net/ens1f0/speed"
  echo 0 >"$sys/class/net/ens1f0/device/numa_node"
  echo 0 >"$sys/bus/pci/devices/0000:3b:00.0/numa_node"
  echo -1 >"$sys/class/net/lo/speed"
  printf 'MemTotal:       32768000 kB\n' >"$1/proc/meminfo"
}

prepare "$operator"
prepare "$exporter"

# Every command, from the entry point's own list.
mapfile -t commands < <(run "$operator" --entrypoint -- --help | sed -n '/^commands:/,/^$/s/^    \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p')
((${#commands[@]} >= 1)) || fail "operator: toposched --help lists no command"
echo "commands: ${commands[*]}"

for image in "$operator" "$exporter"; do
  short=${image#localhost/}
  check "$short: toposched --help" '^usage: toposched' run "$image" --entrypoint -- --help
  check "$short: toposched --version" "^toposched $version\$" run "$image" --entrypoint -- --version
  for c in "${commands[@]}"; do
    check "$short: toposched $c --help" "^usage: toposched $c" run "$image" --entrypoint -- "$c" --help
  done
done

# The operator image: non-root, read-only root, no capabilities.
user=$(bah inspect --type image --format '{{.OCIv1.Config.User}}' "$operator")
if [[ "$user" == 65532:65532 ]]; then pass "operator: image user is $user"; else fail "operator: image user is '$user', not 65532:65532"; fi
check "operator: runs as uid/gid 65532 with no capabilities" '^65532 65532 CapEff:[[:space:]]+0+$' \
  run "$operator" -- python -c 'import os; print(os.getuid(), os.getgid(), [l for l in open("/proc/self/status") if l.startswith("CapEff")][0].strip())'
check "operator: root file system is read-only (EROFS)" '^read-only$' \
  run "$operator" -- python -c '
import errno, os
assert os.statvfs("/").f_flag & os.ST_RDONLY, "/ is not mounted read-only"
try:
    open("/tmp/probe", "w")
except OSError as e:
    print("read-only" if e.errno == errno.EROFS else f"unexpected {e}")
else:
    print("writable")'
check "operator: the DRA allocator answers as 65532" '"error":"not a request' \
  run "$operator" -- sh -c 'echo junk | toposched-dra-allocate'
check "operator: default command is the operator" 'operator --liveness' \
  bah inspect --type image --format '{{.OCIv1.Config.Cmd}}' "$operator"

# The exporter image: root (for the kubelet's PodResources socket) but no capabilities, as in the
# chart; an NRT from a sysfs fixture; netperf/netserver as a restricted user.
check "exporter: runs as uid 0 with no capabilities, read-only root" '^0 0 CapEff:[[:space:]]+0+ True$' \
  run "$exporter" -- python -c 'import os; print(os.getuid(), os.getgid(), [l for l in open("/proc/self/status") if l.startswith("CapEff")][0].strip(), bool(os.statvfs("/").f_flag & os.ST_RDONLY))'
write_fixture "$work/fixture"
check "exporter: toposched nrt --sysfs /host/sys (fixture, 2 NUMA nodes)" \
  'kind: NodeResourceTopology' run "$exporter" --host "$work/fixture" --entrypoint -- \
  nrt --sysfs /host/sys --node smoke-node
nrt=$(run "$exporter" --host "$work/fixture" --entrypoint -- nrt --sysfs /host/sys --node smoke-node -o json 2>&1) || true
if python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["kind"] == "NodeResourceTopology", d.get("kind")
assert d["metadata"]["name"] == "smoke-node"
zones = [z["name"] for z in d["zones"] if z.get("type") == "Node"]
assert zones == ["node-0", "node-1"], zones
' "$nrt" 2>"$work/nrt.err"; then
  pass "exporter: the NRT has the zones node-0 and node-1"
else
  fail "exporter: the NRT is not the expected one: $(tail -1 "$work/nrt.err")"
  head -c 2000 <<<"$nrt" | sed 's/^/       | /'
fi
printf '%s\n' "$nrt" >"$out/smoke-nrt.json" 2>/dev/null || true
if [[ -n "$snapshot" ]]; then
  mkdir -p "$work/snapshot"
  tar -xzf "$snapshot" -C "$work/snapshot"
  check "exporter: toposched nrt on the snapshot ${snapshot##*/}" 'kind: NodeResourceTopology' \
    run "$exporter" --host "$work/snapshot" --entrypoint -- nrt --sysfs /host/sys --node snapshot
fi
check "exporter: netperf -V as 65532" 'Netperf version 2\.7' run "$exporter" --user 65532:65532 -- netperf -V
check "exporter: netserver -V as 65532" 'Netperf version 2\.7' run "$exporter" --user 65532:65532 -- netserver -V

# The kube-scheduler image, when built.
if image_exists "$scheduler"; then
  prepare "$scheduler"
  check "kube-scheduler: --version as 65532 (static binary, FROM scratch)" "Kubernetes $KUBERNETES_VERSION" \
    run "$scheduler" --entrypoint -- --version
  user=$(bah inspect --type image --format '{{.OCIv1.Config.User}}' "$scheduler")
  if [[ "$user" == 65532:65532 ]]; then pass "kube-scheduler: image user is $user"; else fail "kube-scheduler: image user is '$user'"; fi
fi

# The archives import into containerd (a private instance: its own socket, root and state).
if ((use_ctr)) && command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1; then
  mkdir -p "$work/containerd"
  cat >"$work/containerd/config.toml" <<EOF
version = 2
root = "$work/containerd/root"
state = "$work/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/containerd/containerd.sock"
[ttrpc]
  address = "$work/containerd/containerd.sock.ttrpc"
[debug]
  address = "$work/containerd/debug.sock"
EOF
  containerd --config "$work/containerd/config.toml" >"$work/containerd/log" 2>&1 &
  containerd_pid=$!
  for _ in $(seq 50); do [[ -S "$work/containerd/containerd.sock" ]] && break; sleep 0.2; done
  ctr=(ctr --address "$work/containerd/containerd.sock" -n k8s.io)
  for archive in "$out"/toposched-*.tar; do
    [[ -f "$archive" ]] || continue
    name=${archive##*/}
    check "ctr -n k8s.io images import $name" '' "${ctr[@]}" images import --snapshotter native "$archive"
  done
  listed=$("${ctr[@]}" images ls -q 2>&1 || true)
  for ref in "toposched-operator:$version" "toposched-exporter:$version"; do
    # containerd adds its default registry prefix to the archive's short name.
    if grep -Eq "(^|/)$ref\$" <<<"$listed"; then pass "containerd lists $ref"; else fail "containerd does not list $ref: $listed"; fi
  done
  # And they run there (runc, which comes with containerd): read-only root, the image's user.
  if command -v runc >/dev/null 2>&1; then
    ref=$(grep -E "(^|/)toposched-operator:$version\$" <<<"$listed" | head -1)
    check "ctr run --read-only $ref: uid 65532, read-only root" '^65532 1$' "${ctr[@]}" run --rm \
      --snapshotter native --read-only "$ref" "smoke-$$-operator" \
      python -c 'import os; print(os.getuid(), os.statvfs("/").f_flag & os.ST_RDONLY)'
    ref=$(grep -E "(^|/)toposched-exporter:$version\$" <<<"$listed" | head -1)
    check "ctr run --read-only $ref: toposched nrt --sysfs /host/sys" 'kind: NodeResourceTopology' \
      "${ctr[@]}" run --rm --snapshotter native --read-only \
      --mount "type=bind,src=$work/fixture,dst=/host,options=rbind:ro" "$ref" "smoke-$$-exporter" \
      toposched nrt --sysfs /host/sys --node smoke-node
  fi
  kill "$containerd_pid" 2>/dev/null || true
  wait "$containerd_pid" 2>/dev/null || true
  containerd_pid=""
elif ((use_ctr)); then
  echo "skipped: the archive import check (no containerd/ctr; hack/install-image-tools.sh --ctr installs them)"
fi

echo "$passed passed, $failed failed"
((failed == 0))
