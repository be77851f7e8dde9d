#!/usr/bin/env bash
# Installs what the local cluster's real kubelet nodes (testkit.realnode) need from Debian:
#   containerd (+ ctr, containerd-shim-runc-v2)  one container runtime per node
#   runc                                         the OCI runtime containerd drives
#   containernetworking-plugins                  bridge, host-local and loopback CNI plugins
#   busybox-static                               the workload image's only binary
#   gcc, libc6-dev                               the sandbox (pause) image's static binary
#   util-linux, mount, iproute2, openssl         unshare/mount for the fake sysfs, bridge cleanup,
#                                                the kubelets' client certificates
#   prometheus (+ promtool)                      the monitoring test: scrapes the real nodes'
#                                                exporters, the extender and the operator, runs
#                                                the chart's rules (its service is never started)
# Deliberately not iptables: with it the kubelet and the CNI plugins would write host-wide rules
# that outlive the nodes (the kubelets run with makeIPTablesUtilChains: false and no masquerading).
#
# Needs root. Idempotent: does nothing when every tool is already there. Never starts a service
# (a policy-rc.d blocks the package's own containerd for the duration of the install).
set -euo pipefail

log() { printf 'install-node-tools: %s\n' "$*" >&2; }

# tool -> package providing it (Debian bookworm paths)
declare -A needs=(
  [/usr/bin/containerd]=containerd
  [/usr/bin/ctr]=containerd
  [/usr/bin/containerd-shim-runc-v2]=containerd
  [/usr/sbin/runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [/usr/lib/cni/host-local]=containernetworking-plugins
  [/usr/lib/cni/loopback]=containernetworking-plugins
  [/bin/busybox]=busybox-static
  [/usr/bin/gcc]=gcc
  [/usr/lib/x86_64-linux-gnu/libc.a]=libc6-dev
  [/usr/bin/unshare]=util-linux
  [/usr/bin/mount]=mount
  [/usr/sbin/ip]=iproute2
  [/usr/bin/openssl]=openssl
  [/usr/bin/prometheus]=prometheus
  [/usr/bin/promtool]=prometheus
)

missing=()
for path in "${!needs[@]}"; do
  [[ -e $path ]] || missing+=("${needs[$path]}")
done
# busybox (the dynamic one) also provides /bin/busybox; the image needs the static build.
if [[ -e /bin/busybox ]] && ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
  missing+=(busybox-static)
fi
if ((${#missing[@]} == 0)); then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [[ $(id -u) -ne 0 ]]; then
  log "error: needs root (apt-get) to install: ${missing[*]}"
  exit 1
fi
command -v apt-get >/dev/null 2>&1 || { log "error: no apt-get; install these by hand: ${missing[*]}"; exit 1; }

export DEBIAN_FRONTEND=noninteractive
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
log "installing ${missing[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
