#!/usr/bin/env bash
# Installs netperf/netserver (Debian's non-free section), iproute2 and openssl for the tests
# (the prober's network namespaces; the webhook tests' certificates).
# Needs root. Adds the non-free component of the same Debian mirror only if netperf has no
# install candidate yet.
set -euo pipefail

if command -v netperf >/dev/null 2>&1 && command -v netserver >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
  command -v openssl >/dev/null 2>&1; then
  exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "install-netperf: needs root (apt-get)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [[ -z "$(apt-cache policy netperf | sed -n 's/^ *Candidate: //p' | grep -v '(none)')" ]]; then
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  cat >/etc/apt/sources.list.d/toposched-non-free.sources <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: $codename
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  apt-get update -qq
fi
# A policy-rc.d keeps the package from starting a system-wide netserver.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends netperf iproute2 openssl >/dev/null
