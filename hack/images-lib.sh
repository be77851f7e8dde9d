# Shared by hack/build-base-image.sh, hack/build-images.sh and hack/smoke-images.sh (sourced).
#
# buildah runs daemonless, as root, with chroot isolation (no OCI runtime needed) and the
# overlay storage driver where the kernel mounts overlayfs on the cache's file system (a quick
# test mount decides), else vfs (plain directory copies: works everywhere, but every cached
# layer is a full copy, so builds are slower and the cache bigger). It keeps its own storage
# under the toposched cache, outside the repo, one per driver, so it neither needs nor disturbs
# a system-wide containers-storage configured otherwise.
#
# Environment:
#   TOPOSCHED_CACHE_DIR        default ${XDG_CACHE_HOME:-~/.cache}/toposched
#   TOPOSCHED_IMAGE_DRIVER     overlay or vfs (default: overlay if it works here, else vfs)
#   TOPOSCHED_IMAGE_STORAGE    buildah's storage root, default $TOPOSCHED_CACHE_DIR/images/buildah/storage-<driver>
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TOPOSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toposched}
# The images/ folder of the cache is shared with other tools (archives named <name>-<hash>.tar);
# everything here stays in its buildah/ subfolder.
image_cache="$cache/images/buildah"
driver=""
storage=""
runroot="${TMPDIR:-/tmp}/toposched-images-run-$(id -u)"
export BUILDAH_ISOLATION=chroot

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# buildah on the project's own storage.
bah() { buildah --root "$storage" --runroot "$runroot/$driver" --storage-driver "$driver" "$@"; }

overlay_works() {
  local t rc=1
  mkdir -p "$image_cache"
  t=$(mktemp -d "$image_cache/overlay-test.XXXXXX")
  mkdir "$t/lower" "$t/upper" "$t/work" "$t/merged"
  if mount -t overlay overlay -o "lowerdir=$t/lower,upperdir=$t/upper,workdir=$t/work" "$t/merged" 2>/dev/null; then
    umount "$t/merged"
    rc=0
  fi
  rm -rf "$t"
  return $rc
}

# Checks buildah and root, and picks the storage driver and root.
need_buildah() {
  command -v buildah >/dev/null 2>&1 || die "buildah is not installed; run hack/install-image-tools.sh (root)"
  [[ $(id -u) -eq 0 ]] || die "needs root (buildah with chroot isolation and its own storage runs as root here)"
  if [[ -z "$driver" ]]; then
    driver=${TOPOSCHED_IMAGE_DRIVER:-}
    if [[ -z "$driver" ]]; then
      if overlay_works; then driver=overlay; else driver=vfs; fi
    fi
    [[ $driver == overlay || $driver == vfs ]] || die "TOPOSCHED_IMAGE_DRIVER must be overlay or vfs, not '$driver'"
  fi
  storage=${TOPOSCHED_IMAGE_STORAGE:-$image_cache/storage-$driver}
  export STORAGE_DRIVER=$driver
}

# The version of the Python package (toposched/__init__.py's __version__).
toposched_version() {
  sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/toposched/__init__.py"
}

image_exists() { bah inspect --type image "$1" >/dev/null 2>&1; }
