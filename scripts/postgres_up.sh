#!/usr/bin/env bash
# Bring up a private PostgreSQL on 127.0.0.1 for netbox-chat's Postgres tier
# (sessions stored with --store postgresql://...). Debian's package, its own
# cluster in a temp folder, its own port: never the system cluster, never 5432,
# never the live NetBox's instance (scripts/netbox_up.sh, port 5433).
#
# Idempotent: a second run reuses the cluster and the database and only prints
# the env line again. Stop it with scripts/postgres_down.sh (by PID file).
#
# Knobs (environment):
#   NBC_PG_PORT=5441                       port (127.0.0.1 only)
#   NBC_PG_BASE=/tmp/netbox-chat-pg-$PORT  the cluster's folder (owned by postgres)
#
# The last line printed is the env line to use (eval "$(scripts/postgres_up.sh | grep ^export)"):
#   export NETBOX_CHAT_TEST_PG=postgresql://netbox_chat:...@127.0.0.1:5441/netbox_chat
set -euo pipefail
PORT=${NBC_PG_PORT:-5441}
BASE=${NBC_PG_BASE:-/tmp/netbox-chat-pg-$PORT}
DB=netbox_chat ROLE=netbox_chat PASS=netbox-chat-test-only
as_pg() { runuser -u postgres -- "$@"; }
die() { echo "postgres_up.sh: ERROR: $*" >&2; exit 1; }

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "--- installing Debian's postgresql"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
echo "--- postgres: $PG_BIN, cluster $BASE, port $PORT"

mkdir -p "$BASE"; chown postgres:postgres "$BASE"; chmod 700 "$BASE"
if [ ! -f "$BASE/PG_VERSION" ]; then
  as_pg "$PG_BIN/initdb" -D "$BASE" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >/dev/null
fi
if ! as_pg "$PG_BIN/pg_ctl" -D "$BASE" status >/dev/null 2>&1; then
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "something else already listens on 127.0.0.1:$PORT; set NBC_PG_PORT"
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$BASE" -l "$BASE/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$BASE -c fsync=off -c full_page_writes=off -c max_connections=200" >/dev/null \
    || { tail -20 "$BASE/server.log"; die "PostgreSQL did not start"; }
fi
psql_su() { as_pg psql -h "$BASE" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -q "$@"; }
for _ in $(seq 50); do psql_su -tAc 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
psql_su <<SQL
DO \$\$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
    CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASS';
  END IF;
END\$\$;
ALTER ROLE $ROLE CREATEDB;  -- the tests make scratch databases (a store without the schema)
SQL
if ! psql_su -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
  psql_su -c "CREATE DATABASE $DB OWNER $ROLE"
fi
echo "    pid $(head -n1 "$BASE/postmaster.pid") (stop: scripts/postgres_down.sh)"
echo "export NETBOX_CHAT_TEST_PG=postgresql://$ROLE:$PASS@127.0.0.1:$PORT/$DB"
