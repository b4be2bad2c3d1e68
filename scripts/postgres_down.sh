#!/usr/bin/env bash
# Stop the PostgreSQL that scripts/postgres_up.sh started, by its own PID file
# (postmaster.pid), and remove its cluster folder. Same knobs: NBC_PG_PORT, NBC_PG_BASE.
set -uo pipefail
PORT=${NBC_PG_PORT:-5441}
BASE=${NBC_PG_BASE:-/tmp/netbox-chat-pg-$PORT}
if [ -f "$BASE/postmaster.pid" ]; then
  pid=$(head -n1 "$BASE/postmaster.pid")
  # SIGINT is PostgreSQL's "fast" shutdown: it disconnects clients and stops
  if [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "postgres ($pid) did not stop in 10s: sending KILL"; kill -KILL "$pid"; }
    echo "stopped postgres ($pid)"
  fi
fi
[ -f "$BASE/PG_VERSION" ] && rm -rf "$BASE"
exit 0
