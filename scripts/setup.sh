#!/usr/bin/env bash
# Brings up what `make bench` and `make test` need, once, and says what it
# does, one line per step. Called by the Makefile; safe to run again
# (everything present costs a few look-ups, well under 2 s).
#
#   scripts/setup.sh bench [RUN FLAGS]
#       servers for the backend the run will use: nothing for
#       --backend external (or STOCKBENCH_MYSQL_DSN + STOCKBENCH_REDIS_ADDR);
#       MariaDB and Redis for --backend local; for docker and auto, Docker
#       images (official, else offline ones built here from Debian
#       packages) — auto without an engine, or without images when the
#       local servers are present and images cannot be built, uses those
#   scripts/setup.sh test
#       the local servers the test suite starts, and the images its docker
#       tests use when an engine answers (required with
#       STOCKBENCH_REQUIRE_DOCKER=1, else those tests skip)
#
# Installing and building need root and apt; otherwise the script says in
# one line what to run and exits 1. STOCKBENCH_SKIP_SETUP=1 skips it all.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-bench}
if [ $# -gt 0 ]; then shift; fi
[ "${STOCKBENCH_SKIP_SETUP:-0}" = 0 ] || exit 0

say() { echo "setup: $*" >&2; }

root_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

have_local() {
  local p d
  for p in mariadbd mysqld; do
    command -v "$p" >/dev/null 2>&1 && return 0
    for d in /usr/sbin /usr/local/sbin; do [ -x "$d/$p" ] && return 0; done
  done
  return 1
}
have_redis() { command -v redis-server >/dev/null 2>&1 || [ -x /usr/sbin/redis-server ]; }

# Removed on any exit, Ctrl-C included: a policy-rc.d left behind would
# keep every service on the machine from starting.
made_policy= apt_log=
cleanup() {
  [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
  [ -z "$apt_log" ] || rm -f "$apt_log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

apt_updated=
# apt_install installs Debian packages without starting their system-wide
# services (a temporary policy-rc.d, only if the machine has none).
apt_install() {
  if ! root_apt; then
    say "missing: $*; install them (Debian: sudo apt-get install $*) and run again"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  say "installing $* (apt)"
  apt_log=$(mktemp)
  local rc=0
  apt-get install -y -qq --no-install-recommends "$@" >"$apt_log" 2>&1 || rc=$?
  if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; made_policy=; fi
  [ "$rc" = 0 ] || { tail -n 20 "$apt_log" >&2; say "apt-get install $* failed (exit $rc)"; exit 1; }
}

ensure_local() {
  local need=()
  have_local || need+=(mariadb-server)
  have_redis || need+=(redis-server)
  [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
}

# ensure_galera adds what a local Galera cluster needs (make test runs the
# conformance suite on one): the wsrep provider and rsync for state transfers.
have_galera() { [ -e /usr/lib/galera/libgalera_smm.so ] || [ -e /usr/lib/galera-4/libgalera_smm.so ]; }
ensure_galera() {
  local need=()
  have_galera || need+=(galera-4)
  command -v rsync >/dev/null 2>&1 || need+=(rsync)
  [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
}

# ensure_cc: `go test -race` needs cgo, and cgo a C compiler. Go turns cgo
# off by itself when it finds no cc (CGO_ENABLED=0), and -race then stops at
# "-race requires cgo"; install gcc in that case.
ensure_cc() {
  local go=${GO:-go}
  [ "$("$go" env CGO_ENABLED 2>/dev/null)" = 1 ] && return 0
  local cc
  cc=$("$go" env CC 2>/dev/null || true)
  command -v "${cc:-gcc}" >/dev/null 2>&1 || apt_install gcc libc6-dev
  [ "$("$go" env CGO_ENABLED 2>/dev/null)" = 1 ] ||
    { say "cgo is off (CGO_ENABLED=0 set?): go test -race needs it; unset CGO_ENABLED"; exit 1; }
}

# ensure_prometheus: make observe runs Debian's Prometheus beside a run,
# and the runner's Prometheus test scrapes one (it skips without it).
ensure_prometheus() {
  command -v prometheus >/dev/null 2>&1 || apt_install prometheus
}
# ensure_chromium: the live page's test loads it in headless Chromium (it
# skips without it).
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 || apt_install chromium
}

engine() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
image_present() { docker image inspect "$1" >/dev/null 2>&1; }

# images_ready: the official images are present, or the offline ones of the
# current recipe are.
images_ready() {
  { image_present mysql:8.0 && image_present redis:7; } || docker/build-offline-images.sh --check
}

# ensure_images leaves usable images behind: the official ones when present
# or pullable, else the offline ones built here. Returns 1 (having said
# why) when they cannot be had without root.
ensure_images() {
  images_ready && return 0
  if image_present stockbench/mariadb-offline:latest; then
    say "the offline images are from an older recipe: they need a rebuild"
  else
    say "pulling mysql:8.0 and redis:7"
    if docker pull -q mysql:8.0 >/dev/null 2>&1 && docker pull -q redis:7 >/dev/null 2>&1; then
      return 0
    fi
    say "no registry answers: the offline images must be built from Debian packages"
  fi
  if ! root_apt; then
    say "building them needs root: run sudo make images-offline"
    return 1
  fi
  say "building the offline images (about 1-2 min)"
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || apt_install debootstrap
  PATH="$PATH:/usr/sbin" docker/build-offline-images.sh
}

# backend_of reads --backend from run flags (as make bench BENCH_FLAGS=...).
backend_of() {
  local b=auto
  while [ $# -gt 0 ]; do
    case "$1" in
    --backend | -backend) b=${2:-auto}; shift ;;
    --backend=* | -backend=*) b=${1#*=} ;;
    esac
    shift
  done
  echo "$b"
}

case "$mode" in
bench)
  backend=$(backend_of "$@")
  if [ "$backend" = auto ] && [ -n "${STOCKBENCH_MYSQL_DSN:-}" ] && [ -n "${STOCKBENCH_REDIS_ADDR:-}" ]; then
    backend=external
  fi
  case "$backend" in
  external) ;;
  local) ensure_local ;;
  docker)
    engine || { say "--backend docker: no Docker engine answers (is the daemon running, and may this user use it?)"; exit 1; }
    ensure_images || exit 1
    ;;
  *)
    if engine; then
      # Without images and without root, the local servers will do.
      ensure_images || { have_local && have_redis && say "using the local servers instead"; } || exit 1
    else
      ensure_local
    fi
    ;;
  esac
  ;;
test)
  ensure_cc
  ensure_local
  ensure_galera
  ensure_prometheus
  ensure_chromium
  if engine; then
    ensure_images || [ "${STOCKBENCH_REQUIRE_DOCKER:-}" != 1 ] || exit 1
  elif [ "${STOCKBENCH_REQUIRE_DOCKER:-}" = 1 ]; then
    say "STOCKBENCH_REQUIRE_DOCKER=1 but no Docker engine answers: the docker tests will fail"
  fi
  ;;
*)
  say "unknown mode $mode (want bench or test)"
  exit 2
  ;;
esac
