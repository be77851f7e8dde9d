# Shared by hack/build-base-image.sh, hack/build-images.sh and hack/smoke-images.sh (sourced).
#
# buildah runs daemonless with the vfs storage driver (plain directories: no overlay or fuse
# needed) and chroot isolation (no OCI runtime needed). It keeps its own storage under the
# toposched cache, outside the repo, so it neither needs nor disturbs a system-wide
# containers-storage configured with another driver.
#
# Environment:
#   TOPOSCHED_CACHE_DIR        default ${XDG_CACHE_HOME:-~/.cache}/toposched
#   TOPOSCHED_IMAGE_STORAGE    buildah's storage root, default $TOPOSCHED_CACHE_DIR/images/storage
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TOPOSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toposched}
image_cache="$cache/images"
storage=${TOPOSCHED_IMAGE_STORAGE:-$image_cache/storage}
runroot="${TMPDIR:-/tmp}/toposched-images-run-$(id -u)"
export BUILDAH_ISOLATION=chroot STORAGE_DRIVER=vfs

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# buildah on the project's own storage.
bah() { buildah --root "$storage" --runroot "$runroot" --storage-driver vfs "$@"; }

need_buildah() {
  command -v buildah >/dev/null 2>&1 || die "buildah is not installed; run hack/install-image-tools.sh (root)"
  [[ $(id -u) -eq 0 ]] || die "needs root (buildah with the vfs driver and chroot isolation runs as root here)"
}

# The version of the Python package (toposched/__init__.py's __version__).
toposched_version() {
  sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/toposched/__init__.py"
}

image_exists() { bah inspect --type image "$1" >/dev/null 2>&1; }
