#!/usr/bin/env bash
# A throwaway PostgreSQL server for the kernel-database tests: a cluster made by initdb in DIR,
# listening only on a unix socket in DIR (no TCP port, nothing outside DIR touched), trust
# authentication for its superuser "drkc". As root (CI), the server runs as the unprivileged
# user "nobody" (postgres refuses root); otherwise as the calling user.
#   pg_server.sh start DIR       makes the cluster and starts the server (any old one in DIR is
#                                stopped and removed first); prints the URL of database "postgres"
#   pg_server.sh createdb DIR NAME   (re)creates database NAME empty; prints its URL
#   pg_server.sh url DIR NAME    the URL of database NAME
#   pg_server.sh stop DIR        stops the server and removes DIR
#   pg_server.sh bindir          the server's binaries (exit 77 when there are none)
# Exit status: 0 done, 1 failed (with the server's log), 77 no PostgreSQL server installed.
set -u
cmd=${1:-}; D=${2:-}

bindir() {
  local b
  for b in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) $(dirname "$(command -v postgres 2>/dev/null || echo /nonexistent/x)"); do
    [ -x "$b/initdb" ] && [ -x "$b/pg_ctl" ] && [ -x "$b/postgres" ] && { echo "$b"; return 0; }
  done
  return 1
}

# as the server's user: nobody under root, else ourselves. initdb runs shell commands that write
# to /dev/null; where /dev/null is not a character device (a container that lost it), root runs
# the server's commands in a mount namespace of their own with a null device of DIR bound over
# it (the server keeps that namespace; nothing outside changes).
as_server() {
  if [ "$(id -u)" -ne 0 ]; then "$@"; return; fi
  if [ -c /dev/null ]; then runuser -u nobody -- "$@"; return; fi
  [ -c "$D/null" ] || mknod -m 666 "$D/null" c 1 3 || return 1
  unshare -m sh -c 'mount --bind "$0" /dev/null && exec runuser -u nobody -- "$@"' "$D/null" "$@"
}

url() { echo "postgresql://drkc@/$1?host=$D"; }

case "$cmd" in
  bindir)
    bindir || { echo "SKIP: no PostgreSQL server (initdb, pg_ctl, postgres under /usr/lib/postgresql/*/bin): apt-get install postgresql"; exit 77; }
    ;;
  start)
    [ -n "$D" ] || { echo "usage: pg_server.sh start DIR" >&2; exit 2; }
    B=$(bindir) || { echo "SKIP: no PostgreSQL server (initdb, pg_ctl, postgres under /usr/lib/postgresql/*/bin): apt-get install postgresql"; exit 77; }
    # a unix socket path must fit in 107 bytes
    [ ${#D} -le 80 ] || { echo "pg_server.sh: error: $D is too long for a unix socket path (80 characters at most)" >&2; exit 1; }
    [ -c /dev/null ] || [ "$(id -u)" -eq 0 ] || {
      echo "pg_server.sh: error: /dev/null is not a character device on this machine (initdb writes to it; as root this script works around it)" >&2; exit 1; }
    if [ -f "$D/data/postmaster.pid" ]; then as_server "$B/pg_ctl" -D "$D/data" -m immediate -w stop >/dev/null 2>&1; fi
    rm -rf "$D"; mkdir -p "$D" || exit 1
    if [ "$(id -u)" -eq 0 ]; then
      chown nobody "$D" || exit 1
      # nobody must reach DIR through its parents
      p=$D; while [ "$p" != / ]; do p=$(dirname "$p"); [ -x "$p" ] || chmod o+x "$p"; done
      perm_ok=$(runuser -u nobody -- sh -c "test -w '$D' && echo yes")
      [ "$perm_ok" = yes ] || { echo "pg_server.sh: error: user nobody cannot write $D (its parents' permissions)" >&2; exit 1; }
    fi
    if ! as_server "$B/initdb" -D "$D/data" -U drkc --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$D/initdb.log" 2>&1 &&
       ! as_server "$B/initdb" -D "$D/data" -U drkc --auth=trust --encoding=UTF8 --locale=C >"$D/initdb.log" 2>&1; then
      echo "pg_server.sh: error: initdb failed:" >&2; cat "$D/initdb.log" >&2; exit 1
    fi
    if ! as_server "$B/pg_ctl" -D "$D/data" -l "$D/server.log" -w -t 60 \
         -o "-c listen_addresses='' -c unix_socket_directories='$D' -c port=5432 -c max_connections=100 -c fsync=off" \
         start >"$D/pg_ctl.log" 2>&1; then
      echo "pg_server.sh: error: the server did not start:" >&2; cat "$D/pg_ctl.log" "$D/server.log" >&2; exit 1
    fi
    url postgres
    ;;
  createdb)
    name=${3:?usage: pg_server.sh createdb DIR NAME}
    B=$(bindir) || exit 77
    "$B/psql" -X -q -v ON_ERROR_STOP=1 "$(url postgres)" -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" \
      -c "CREATE DATABASE \"$name\"" >"$D/createdb.$name.log" 2>&1 ||
      { echo "pg_server.sh: error: creating database $name:" >&2; cat "$D/createdb.$name.log" >&2; exit 1; }
    url "$name"
    ;;
  url)
    url "${3:?usage: pg_server.sh url DIR NAME}"
    ;;
  stop)
    [ -n "$D" ] || { echo "usage: pg_server.sh stop DIR" >&2; exit 2; }
    B=$(bindir) || exit 77
    if [ -f "$D/data/postmaster.pid" ]; then
      as_server "$B/pg_ctl" -D "$D/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
        as_server "$B/pg_ctl" -D "$D/data" -m immediate -w stop >/dev/null 2>&1
    fi
    rm -rf "$D"
    ;;
  *)
    echo "usage: pg_server.sh start|createdb|url|stop DIR [NAME] | bindir" >&2; exit 2 ;;
esac
