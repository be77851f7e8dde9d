#!/usr/bin/env bash
# Builds toposched's container images without a daemon (buildah: chroot isolation, overlay or vfs
# storage, see hack/images-lib.sh) and writes them as docker-archive tarballs that `docker load`,
# `podman load` and `ctr -n k8s.io images import` accept.
#
#   hack/build-images.sh [operator|exporter|kube-scheduler ...]    default: all three
#   hack/build-images.sh --clean     remove the archives and the image storage (base included)
#
#   toposched-operator:<version>        Dockerfile.operator   (<version>: toposched/__init__.py)
#   toposched-exporter:<version>        Dockerfile.exporter
#   toposched-kube-scheduler:<k8s>      hack/Dockerfile.kube-scheduler, from the binary that
#                                       hack/build-binaries.sh built (skipped when it has not;
#                                       `make binaries` first)
#
# The base of the Python images (IMAGE_BASE):
#   auto       (default) the Dockerfiles' official base (ARG BASE) when it is in the local storage
#              or can be pulled; else the local Debian bookworm base (hack/build-base-image.sh)
#   official   the official base, or fail
#   local      the local Debian base
#   <image>    any other image reference, passed as --build-arg BASE
#
# Environment: IMAGES_DIR (default .images in the repo) for the archives and build logs;
# TOPOSCHED_IMAGE_HOST_CA=0 not to lend this machine's CA bundle to the build steps (see below).
set -euo pipefail
# shellcheck source=images-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/images-lib.sh"

out=${IMAGES_DIR:-$repo/.images}
base_choice=${IMAGE_BASE:-auto}

if [[ "${1:-}" == --clean ]]; then
  if command -v buildah >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
    for driver in overlay vfs; do
      storage=${TOPOSCHED_IMAGE_STORAGE:-$image_cache/storage-$driver}
      [[ -d "$storage" ]] || continue
      bah rm --all >/dev/null 2>&1 || true
      bah rmi --all --force >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$out" "$image_cache" "$runroot"
  log "removed ${out#"$repo"/} and $image_cache"
  exit 0
fi
targets=("$@")
prune=0
((${#targets[@]})) || { targets=(operator exporter kube-scheduler); prune=1; }
for t in "${targets[@]}"; do
  [[ $t =~ ^(operator|exporter|kube-scheduler)$ ]] || die "unknown image '$t' (operator, exporter, kube-scheduler)"
done

need_buildah
log "buildah $(buildah --version | awk '{print $3}'), $driver storage in $storage"
version=$(toposched_version)
[[ -n "$version" ]] || die "no __version__ in toposched/__init__.py"
# shellcheck source=versions.env
source "$repo/hack/versions.env"
mkdir -p "$out" "$image_cache"
started=$SECONDS

official=$(sed -n 's/^ARG BASE=//p' "$repo/Dockerfile.operator")
[[ -n "$official" ]] || die "Dockerfile.operator has no 'ARG BASE=' default"
[[ "$(sed -n 's/^ARG BASE=//p' "$repo/Dockerfile.exporter")" == "$official" ]] ||
  die "Dockerfile.operator and Dockerfile.exporter have different ARG BASE defaults"

pull_official() {
  image_exists "$official" && return 0
  log "pulling the official base $official"
  timeout 300 buildah --root "$storage" --runroot "$runroot/$driver" --storage-driver "$driver" \
    pull --quiet "$official" >"$out/pull-base.log" 2>&1
}

python_images=0
for t in "${targets[@]}"; do [[ $t == kube-scheduler ]] || python_images=1; done
base=""
if ((python_images)); then
  case "$base_choice" in
    auto)
      if pull_official; then
        base=$official
        log "base: the official $official"
      else
        reason=$(tail -1 "$out/pull-base.log")
        log "the official base $official cannot be pulled (${reason##*: }; see ${out#"$repo"/}/pull-base.log)"
        base=$("$repo/hack/build-base-image.sh")
        log "base: the local Debian bookworm base $base (IMAGE_BASE=official to insist on the official one)"
      fi
      ;;
    official)
      pull_official || die "cannot pull $official (see $out/pull-base.log); IMAGE_BASE=local builds on a local Debian base"
      base=$official
      log "base: the official $official"
      ;;
    local)
      base=$("$repo/hack/build-base-image.sh")
      log "base: the local Debian bookworm base $base"
      ;;
    *)
      base=$base_choice
      image_exists "$base" || bah pull --quiet "$base" >/dev/null || die "cannot find or pull the base $base"
      log "base: $base"
      ;;
  esac
fi

# pip and apt in the build steps verify TLS with the base image's CA bundle. A machine behind
# a TLS-inspecting proxy trusts the proxy's CA in its own bundle only, so its bundle is lent to
# the build steps (a read-only bind mount, with a pip.conf pointing at it). Neither ends up in
# an image: build-time mounts are not part of any layer.
build_mounts=()
host_ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [[ "${TOPOSCHED_IMAGE_HOST_CA:-1}" != 0 && -f "$host_ca" ]]; then
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$image_cache/pip.conf"
  build_mounts=(
    --volume "$host_ca:/etc/ssl/certs/ca-certificates.crt:ro"
    --volume "$image_cache/pip.conf:/etc/pip.conf:ro"
  )
fi

# The image IDs every build step produced or reused (for pruning the rest afterwards).
: >"$out/used-ids"

build() {
  local name=$1 dockerfile=$2 context=$3 tag=$4
  shift 4
  local t0=$SECONDS logfile="$out/build-$name.log"
  log "building $tag from ${dockerfile#"$repo"/} (log: ${logfile#"$repo"/})"
  if ! bah bud --layers --pull=never --force-rm --isolation chroot \
    --ignorefile "$repo/hack/images.dockerignore" \
    "${build_mounts[@]}" "$@" -f "$dockerfile" -t "$tag" "$context" >"$logfile" 2>&1; then
    tail -25 "$logfile" >&2
    die "building $tag failed; full log in $logfile"
  fi
  sed -n -e 's/^--> \([0-9a-f]\{11,\}\)$/\1/p' -e 's/.*Using cache \([0-9a-f]\{64\}\).*/\1/p' "$logfile" |
    cut -c1-11 >>"$out/used-ids"
  log "built $tag in $((SECONDS - t0)) s"
}

# The archive, rewritten only when the image changed (its ID is kept beside it).
archive() {
  local tag=$1 file=$2 t0=$SECONDS id
  id=$(bah images --no-trunc --noheading --format '{{.ID}}' "localhost/$tag")
  if [[ -f "$file" && "$(cat "$file.id" 2>/dev/null)" == "$id" ]]; then
    log "${file#"$repo"/} is up to date"
    return 0
  fi
  rm -f "$file" "$file.id" "$file.tmp"
  bah push --quiet "localhost/$tag" "docker-archive:$file.tmp:$tag" >/dev/null
  mv "$file.tmp" "$file"
  echo "$id" >"$file.id"
  log "wrote ${file#"$repo"/} in $((SECONDS - t0)) s"
}

written=()
for t in "${targets[@]}"; do
  case "$t" in
    operator | exporter)
      if [[ $t == operator ]]; then  # the DRA allocator helper, where make binaries has built it
        stage="$repo/helpers/dra-allocate/out"
        rm -f "$stage/toposched-dra-allocate"
        if bin=$("$repo/hack/build-binaries.sh" --print 2>/dev/null) && [[ -x "$bin/toposched-dra-allocate" ]]; then
          cp "$bin/toposched-dra-allocate" "$stage/"
        else
          log "the operator image without toposched-dra-allocate: the pinned binaries are not built yet (make binaries)"
        fi
      fi
      tag="toposched-$t:$version"
      build "$t" "$repo/Dockerfile.$t" "$repo" "$tag" --build-arg "BASE=$base"
      archive "$tag" "$out/toposched-$t-$version.tar"
      written+=("$tag|$out/toposched-$t-$version.tar")
      ;;
    kube-scheduler)
      if ! bin=$("$repo/hack/build-binaries.sh" --print 2>/dev/null) || [[ ! -x "$bin/kube-scheduler" ]]; then
        log "skipping toposched-kube-scheduler: the pinned binaries are not built yet (make binaries)"
        continue
      fi
      tag="toposched-kube-scheduler:$KUBERNETES_VERSION"
      ctx=$(mktemp -d "$image_cache/kube-scheduler-context.XXXXXX")
      cp "$bin/kube-scheduler" "$ctx/"
      build "$t" "$repo/hack/Dockerfile.kube-scheduler" "$ctx" "$tag"
      rm -rf "$ctx"
      archive "$tag" "$out/toposched-kube-scheduler-$KUBERNETES_VERSION.tar"
      written+=("$tag|$out/toposched-kube-scheduler-$KUBERNETES_VERSION.tar")
      ;;
  esac
done

# Drop the untagged images (with vfs every cached layer is a full copy of its file system) that
# none of this run's steps produced or reused (earlier builds' layers). Only after a full run,
# so that building one image does not drop the others' cache.
if ((prune)); then
  while read -r id name; do
    [[ $name == "<none>" ]] || continue
    grep -qx "${id:0:11}" "$out/used-ids" && continue
    bah rmi "$id" >/dev/null 2>&1 || true
  done < <(bah images --all --noheading --format '{{.ID}} {{.Name}}')
fi

log "done in $((SECONDS - started)) s; image storage ${storage} uses $(du -sh "$storage" 2>/dev/null | cut -f1)"
printf '%-42s %10s %10s  %s\n' IMAGE "IMAGE MB" "TAR MB" ARCHIVE
for w in "${written[@]}"; do
  tag=${w%%|*}
  file=${w#*|}
  bytes=$(stat -c %s "$file")
  size=$(bah images --noheading --format '{{.Size}}' "localhost/$tag" | head -1)
  printf '%-42s %10s %10s  %s\n' "$tag" "${size% MB}" "$((bytes / 1000000))" "${file#"$repo"/}"
done
