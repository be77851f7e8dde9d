#!/usr/bin/env bash
# A local stand-in for the official Python base image (python:3.11-slim-bookworm), made from
# Debian bookworm packages, for machines that reach Debian's package archive but no image
# registry. It has Debian's Python 3.11 (python3, venv), apt and dpkg, with the same
# /etc/apt/sources.list.d/debian.sources layout and the same dpkg excludes as Debian's slim
# images, so the Dockerfiles' RUN steps (apt-get included) work the same on both.
#
#   hack/build-base-image.sh            build it unless it is in the cache; print its name
#   hack/build-base-image.sh --print    print its name only (exit 1 if not built yet)
#   hack/build-base-image.sh --force    rebuild it
#
# The image lives in the project's buildah storage in the cache, outside the repo
# (hack/images-lib.sh), tagged localhost/toposched-base:bookworm-<hash of this file>: editing the
# recipe below rebuilds it (and drops the old one), anything else reuses it.
#
# Environment: DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR (default: the ones this machine's apt uses).
set -euo pipefail
# shellcheck source=images-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/images-lib.sh"

suite=bookworm
# Python 3.11 and venv for the build stage, apt's https support and CA certificates for RUN
# steps that install packages; everything else comes with debootstrap's minbase variant.
packages=python3,python3-venv,ca-certificates

key=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
name="localhost/toposched-base:$suite-$key"

case "${1:-}" in
  --print)
    need_buildah
    image_exists "$name" || exit 1
    echo "$name"
    exit 0
    ;;
  --force) force=1 ;;
  "") force=0 ;;
  *) die "usage: $0 [--print|--force]" ;;
esac

need_buildah
if ((force == 0)) && image_exists "$name"; then
  echo "$name"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed; run hack/install-image-tools.sh (root)"

# The Debian archive (and its security archive) this machine's apt is configured with.
apt_uri() {
  local pattern=$1
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' |
    tr ' ' '\n' | grep -E "$pattern" | head -1 || true
}
mirror=${DEBIAN_MIRROR:-$(apt_uri '/debian/?$')}
security=${DEBIAN_SECURITY_MIRROR:-$(apt_uri '/debian-security/?$')}
[[ -n "$mirror" ]] || die "no Debian archive in this machine's apt sources; set DEBIAN_MIRROR"
[[ -n "$security" ]] || security="${mirror%/debian*}/debian-security"

log "building the local base image $name from Debian $suite packages ($mirror)"
started=$SECONDS
ctr=$(bah from --name "toposched-base-build-$$" scratch)
cleanup() { bah rm "$ctr" >/dev/null 2>&1 || true; }
trap cleanup EXIT
root=$(bah mount "$ctr")

debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$image_cache/debootstrap.log" 2>&1 || {
  tail -20 "$image_cache/debootstrap.log" >&2
  die "debootstrap failed; full log in $image_cache/debootstrap.log"
}

# Sources as in Debian's own images (deb822, main only; the Dockerfiles add components with sed).
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES

# Security updates for what debootstrap installed (it only knows the main suite).
chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
  'apt-get update -qq && apt-get upgrade -y -qq --no-install-recommends >/dev/null && apt-get clean' \
  >>"$image_cache/debootstrap.log" 2>&1 || die "apt-get upgrade in the base failed; see $image_cache/debootstrap.log"

# Lean, as Debian's slim images: no documentation, manual pages or translations, now or from
# packages installed later; no apt lists or package caches.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EXCLUDES'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EXCLUDES
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$root/etc/apt/apt.conf.d/docker-no-recommends"
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,info,groff,lintian,linda,locale}/* \
  "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
  "$root"/var/lib/dpkg/*-old "$root"/var/log/* "$root"/tmp/* "$root"/root/.cache
# A fresh machine-id and resolv.conf come from the runtime.
: >"$root/etc/machine-id"
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"

bah config \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 \
  --cmd python3 \
  --label org.opencontainers.image.description="Debian $suite with Python 3.11 (local base for toposched images)" \
  --label io.toposched.base-recipe="$key" \
  "$ctr"
bah unmount "$ctr" >/dev/null
bah commit --quiet --rm "$ctr" "$name" >/dev/null
trap - EXIT
# Bases of earlier recipes are no longer used.
for old in $(bah images --noheading --format '{{.Name}}:{{.Tag}}' localhost/toposched-base 2>/dev/null); do
  [[ $old == "$name" ]] || bah rmi "$old" >/dev/null 2>&1 || true
done
log "built $name in $((SECONDS - started)) s ($(bah images --noheading --format '{{.Size}}' "$name" | head -1))"
echo "$name"
