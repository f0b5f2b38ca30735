#!/bin/sh
# Stand-in for the official nats image's entrypoint: flags alone run nats-server with them.
set -e
case "${1:-}" in
  -*) set -- nats-server "$@" ;;
esac
exec "$@"
