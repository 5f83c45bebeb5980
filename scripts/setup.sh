#!/usr/bin/env bash
# Brings up what `make bench` and `make test` need, once, and says what it
# does. Called by the Makefile; safe to run again (everything present costs
# a few docker/command look-ups, well under 2 s).
#
#   scripts/setup.sh bench   servers for the auto backend: Docker images
#                            (official, else offline ones built here), or
#                            without an engine the local MariaDB and Redis
#   scripts/setup.sh test    the local servers the test suite starts, and
#                            the images for its docker tests when an engine
#                            answers
#
# Installing needs root and apt; otherwise the script says in one line what
# to install and exits 1. STOCKBENCH_SKIP_SETUP=1 skips it all.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-bench}
[ -z "${STOCKBENCH_SKIP_SETUP:-}" ] || exit 0

say() { echo "setup: $*" >&2; }

have_local() {
  local p
  for p in mariadbd mysqld; do
    command -v "$p" >/dev/null 2>&1 && return 0
    for d in /usr/sbin /usr/local/sbin; do [ -x "$d/$p" ] && return 0; done
  done
  return 1
}
have_redis() { command -v redis-server >/dev/null 2>&1 || [ -x /usr/sbin/redis-server ]; }

apt_updated=
# apt_install installs Debian packages without starting their system-wide
# services (a temporary policy-rc.d, only if the machine has none).
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing: $*; install them (Debian: apt-get install $*) and run again"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  local made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  say "installing $* (apt)"
  local rc=0 log
  log=$(mktemp)
  apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1 || rc=$?
  [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { tail -n 20 "$log" >&2; rm -f "$log"; say "apt-get install $* failed (exit $rc)"; exit 1; }
  rm -f "$log"
}

ensure_local() {
  local need=()
  have_local || need+=(mariadb-server)
  have_redis || need+=(redis-server)
  [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
}

engine() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
image_present() { docker image inspect "$1" >/dev/null 2>&1; }

# ensure_images leaves usable images behind: the official ones when present
# or pullable, else the offline ones (built here from Debian packages).
ensure_images() {
  local my=${STOCKBENCH_MYSQL_IMAGE:-mysql:8.0} rd=${STOCKBENCH_REDIS_IMAGE:-redis:7}
  image_present "$my" && image_present "$rd" && return 0
  # The build script returns at once when images of its recipe are present.
  if image_present stockbench/mariadb-offline:latest && image_present stockbench/redis-offline:latest; then
    docker/build-offline-images.sh --check && return 0
    say "the offline images are from an older recipe: rebuilding them (about 1-2 min)"
  else
    say "pulling $my and $rd"
    if docker pull -q "$my" >/dev/null 2>&1 && docker pull -q "$rd" >/dev/null 2>&1; then
      return 0
    fi
    say "no registry answers: building the offline images from Debian packages (about 1-2 min)"
  fi
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || apt_install debootstrap
  PATH="$PATH:/usr/sbin" docker/build-offline-images.sh
}

case "$mode" in
bench)
  if engine; then ensure_images; else ensure_local; fi
  ;;
test)
  ensure_local
  if engine; then ensure_images; fi
  ;;
*)
  say "unknown mode $mode (want bench or test)"
  exit 2
  ;;
esac
