#!/usr/bin/env bash
# Stop what scripts/netbox_up.sh started, by PID file only: gunicorn (NetBox), the private
# redis-server and the private PostgreSQL instance. Never touches the system cluster or
# any process it did not start. Same knobs as netbox_up.sh: NB_PORT, NB_BASE.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
NB_PORT=${NB_PORT:-8001}
NB_BASE=${NB_BASE:-$REPO/.netbox-dev/p$NB_PORT}

stop_pid() {  # name pidfile [signal]
  local f=$2 pid
  [ -f "$f" ] || return 0
  pid=$(head -n1 "$f")
  if [ -n "$pid" ] && kill -"${3:-TERM}" "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$1 ($pid) did not stop in 10s: sending KILL"; kill -KILL "$pid" 2>/dev/null
    fi
    echo "stopped $1 ($pid)"
  fi
  rm -f "$f"
}

stop_pid netbox-server "$NB_BASE/netbox-server.pid"
stop_pid redis "$NB_BASE/redis.pid"
if [ -f "$NB_BASE/pgdata.path" ]; then
  PGDATA=$(cat "$NB_BASE/pgdata.path")
  # postmaster.pid is PostgreSQL's own pid file; SIGINT is its "fast" shutdown
  [ -f "$PGDATA/postmaster.pid" ] && stop_pid postgres "$PGDATA/postmaster.pid" INT
  rm -f "$NB_BASE/postgres.pid"
fi
exit 0
