#!/bin/sh
# Stand-in for the official redis image's entrypoint: flags alone run redis-server with them; as root,
# /data is given to the redis user (uid 999) and the server runs as that user, not as root. The
# official image's redis-server is built with protected mode off by default; Debian's is not, so the
# stand-in turns it off first (a --protected-mode given to the container still decides).
set -e
case "${1:-}" in
  -*|*.conf) set -- redis-server "$@" ;;
esac
if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
  find . \! -user redis -exec chown redis '{}' +
  exec setpriv --reuid=redis --regid="$(id -g redis)" --init-groups "$0" "$@"
fi
if [ "$1" = 'redis-server' ]; then
  shift
  case "${1:-}" in
    *.conf) conf="$1"; shift; set -- redis-server "$conf" --protected-mode no "$@" ;;
    *) set -- redis-server --protected-mode no "$@" ;;
  esac
fi
um="$(umask)"
if [ "$um" = '0022' ]; then umask 0077; fi
exec "$@"
