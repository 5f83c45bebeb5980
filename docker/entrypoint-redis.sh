#!/bin/sh
# Entrypoint of the offline Redis image: like the official image, runs the
# given command (redis-server with its arguments, or anything else).
set -e
if [ "$1" = "redis-server" ]; then
  shift
  exec redis-server "$@"
fi
exec "$@"
