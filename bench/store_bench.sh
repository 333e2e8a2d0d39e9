#!/usr/bin/env bash
# Runs build/bench/store_bench against a SQLite file and real PostgreSQL and
# MariaDB servers started on loopback for the run (tests/store/databases).
#   bench/store_bench.sh [--jobs 100000]
set -euo pipefail
cd "$(dirname "$0")/.."
state=$(mktemp -d /tmp/headway-store-bench-XXXXXX)
trap 'tests/store/databases stop "$state" > /dev/null; rm -rf "$state"' EXIT
tests/store/databases start "$state" > /dev/null
pg=$(cat "$state/postgresql.url")
my=$(cat "$state/mysql.url")
psql -q "$pg" -c "CREATE DATABASE bench" > /dev/null
port=${my##*:}; port=${port%%/*}
mariadb --no-defaults -h 127.0.0.1 -P "$port" -u headway -e "CREATE DATABASE bench"
build/bench/store_bench --sqlite "$state/bench.db" --postgresql "${pg%/*}/bench" \
  --mysql "${my%/*}/bench" "$@"
