#!/bin/sh
# A PostgreSQL server of the tests' own, from Debian's packages: its data and
# its socket in DIR, no TCP port (so runs never collide), stopped by `stop`.
#
#   server.sh start DIR [extra postgres -c settings...]   prints the conninfo
#   server.sh stop DIR [MODE]                              MODE: fast (default), immediate
#   server.sh promote DIR
#
# As root, the server runs as the `postgres` user (initdb refuses root).
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "server.sh: no PostgreSQL server (apt-get install postgresql)" >&2; exit 1; }
cmd=$1; dir=$2; shift 2
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case $cmd in
start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-instructions >"$dir/initdb.log" 2>&1 ||
            { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    opts="-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=on -c synchronous_commit=on"
    for setting in "$@"; do opts="$opts -c $setting"; done
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$opts" start >/dev/null ||
        { tail -20 "$dir/server.log" >&2; exit 1; }
    echo "host=$dir user=postgres"
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m "${1:-fast}" -w -t 60 stop >/dev/null
    ;;
promote)
    as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
*)
    echo "server.sh: start, stop or promote" >&2; exit 2
    ;;
esac
