#!/usr/bin/env bash
# Builds the images the docker backend can use where no registry is
# reachable: a MySQL-compatible image (MariaDB) and a Redis image, both from
# Debian packages. One debootstrap'd root file system is imported twice with
# different entrypoints. The Debian mirror is read from this host's apt
# configuration; nothing about it is written into the repository.
#
# Usage: docker/build-offline-images.sh            (tags below, skips if present)
#        docker/build-offline-images.sh --check    (exit 0 when present and current)
#        FORCE=1 docker/build-offline-images.sh    (rebuild)
set -euo pipefail
cd "$(dirname "$0")"

MARIADB_TAG=${MARIADB_TAG:-stockbench/mariadb-offline:latest}
REDIS_TAG=${REDIS_TAG:-stockbench/redis-offline:latest}
# The recipe's version, kept in the images' stockbench.offline label: an
# image built by an older recipe is rebuilt. Bump it when the recipe or an
# entrypoint changes.
RECIPE=2

current() { [ "$(docker image inspect -f '{{index .Config.Labels "stockbench.offline"}}' "$1" 2>/dev/null)" = "$RECIPE" ]; }
if [ "${1:-}" = --check ]; then
  current "$MARIADB_TAG" && current "$REDIS_TAG"
  exit
fi
if [ -z "${FORCE:-}" ] && current "$MARIADB_TAG" && current "$REDIS_TAG"; then
  echo "offline images present: $MARIADB_TAG $REDIS_TAG"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }

# The suite and the mirror this host installs from.
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
mirror=
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ {for (i=2;i<=NF;i++) if ($i=="'"$suite"'") print u}' /etc/apt/sources.list.d/debian.sources | head -n1)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" && $3=="'"$suite"'" {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$suite" ] && [ -n "$mirror" ] || { echo "cannot read the Debian suite and mirror from /etc/apt" >&2; exit 1; }

root=$(mktemp -d /var/tmp/stockbench-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap $suite from the host's mirror into $root"
debootstrap --variant=minbase --include=mariadb-server,redis-server "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
install -m 0755 entrypoint-mariadb.sh "$root/usr/local/bin/stockbench-mariadb"
install -m 0755 entrypoint-redis.sh "$root/usr/local/bin/stockbench-redis"
mkdir -p "$root/etc/mysql/conf.d" "$root/usr/local/etc/redis" "$root/var/lib/mysql" "$root/data"
rm -rf "$root/var/lib/mysql/"* "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*

echo "importing $MARIADB_TAG"
tar -C "$root" -c . | docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/stockbench-mariadb"]' --change 'CMD ["mariadbd"]' \
  --change 'EXPOSE 3306' --change "LABEL stockbench.offline=$RECIPE" - "$MARIADB_TAG" >/dev/null
echo "importing $REDIS_TAG"
tar -C "$root" -c . | docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/stockbench-redis"]' --change 'CMD ["redis-server"]' \
  --change 'EXPOSE 6379' --change "LABEL stockbench.offline=$RECIPE" - "$REDIS_TAG" >/dev/null
echo "built $MARIADB_TAG and $REDIS_TAG"
