#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for CDC tests: wal_level=logical, trust auth, listening on 127.0.0.1 only.
#
#   postgres.sh start DIR PORT   initdb DIR/data (once), start it on 127.0.0.1:PORT (socket in DIR), print the
#                                postmaster's pid. As root, initdb and the server run as the `postgres` user.
#   postgres.sh stop DIR         pg_ctl stop -m fast.
# Connect with: psql -h 127.0.0.1 -p PORT -U postgres postgres
# Env: PG_BIN (default: the directory of `initdb` on PATH, else the newest /usr/lib/postgresql/*/bin).
set -euo pipefail
usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
cmd="${1:-}"; dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || usage
if [[ -z "${PG_BIN:-}" ]]; then
    if command -v initdb >/dev/null; then PG_BIN="$(dirname "$(readlink -f "$(command -v initdb)")")"
    else PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"; fi
fi
as_pg() { if [[ $EUID -eq 0 ]]; then su postgres -s /bin/bash -c "$(printf '%q ' "$@")"; else "$@"; fi; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
[[ $EUID -eq 0 ]] && chown postgres "$dir"
case "$cmd" in
stop)
    [[ -f "$dir/data/postmaster.pid" ]] && as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    exit 0 ;;
start) ;;
*) usage ;;
esac
port="${3:-}"; [[ -n "$port" ]] || usage
if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    as_pg "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
fi
as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w start -o \
    "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10" \
    >/dev/null || { tail -n 20 "$dir/postgres.log" >&2; exit 1; }
head -n 1 "$dir/data/postmaster.pid"
