#!/usr/bin/env bash
# Installs what `make images` needs from Debian's packages: buildah (a daemonless image builder,
# used with chroot isolation and the kernel's overlay or the vfs storage driver, so it needs no
# daemon, fuse-overlayfs or OCI runtime) and debootstrap (the local base image when no image
# registry is reachable). With --ctr it also installs containerd, whose `ctr` checks that the
# image archives import.
#
#   hack/install-image-tools.sh [--ctr]
#
# Idempotent: exits at once when everything is there. Needs root (apt-get).
set -euo pipefail

want=(buildah debootstrap)
[[ "${1:-}" == "--ctr" ]] && want+=(ctr)

missing=()
for cmd in "${want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "install-image-tools: needs root (apt-get) to install: ${missing[*]}" >&2
  echo "install-image-tools: as root: apt-get install --no-install-recommends buildah debootstrap" >&2
  exit 1
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "install-image-tools: no apt-get; install buildah and debootstrap with this system's package manager" >&2
  exit 1
}

packages=()
for cmd in "${missing[@]}"; do
  case "$cmd" in
    ctr) packages+=(containerd) ;;
    *) packages+=("$cmd") ;;
  esac
done
export DEBIAN_FRONTEND=noninteractive
echo "install-image-tools: installing ${packages[*]}" >&2
apt-get update -qq
# Recommends would bring fuse-overlayfs and an OCI runtime, which chroot isolation does not use.
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# containerd's package enables its service; nothing here needs the daemon running.
if [[ " ${packages[*]} " == *" containerd "* ]] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
for cmd in "${missing[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || { echo "install-image-tools: $cmd still missing" >&2; exit 1; }
done
