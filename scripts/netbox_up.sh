#!/usr/bin/env bash
# Bring up a real NetBox 4.7.3 on 127.0.0.1 for netbox-chat's live tests (pytest -m live).
#
# Everything this script starts is private to it and stoppable by PID with
# scripts/netbox_down.sh: its own PostgreSQL instance (initdb in $NB_BASE, port
# $NB_PG_PORT, never the system cluster), its own redis-server ($NB_REDIS_PORT)
# and gunicorn ($NB_PORT). Nothing listens on anything but 127.0.0.1.
#
# Idempotent: a second run reuses the venv, the database, the tokens, the running
# servers and the seeded objects, and only prints the env lines again.
#
# Knobs (environment):
#   NB_PORT=8001          NetBox HTTP port (127.0.0.1 only)
#   NB_PG_PORT=5433       private PostgreSQL port      NB_REDIS_PORT=6380  private redis port
#   NB_BASE=<repo>/.netbox-dev/p$NB_PORT   state: pgdata, logs, pid files, NetBox config
#   NB_VENV=${XDG_CACHE_HOME:-~/.cache}/netbox-chat/netbox-4.7.3-py3.12
#                         NetBox's own Python 3.12 venv (outside the clone, so reused)
#   NB_DUMP=<repo>/tests/netbox/netbox_chat_seeded.sql.gz
#                         restore this dump into a new database instead of running the
#                         ~340 migrations (about 10 minutes); NB_DUMP=none forces migrations
#   DUMP_OUT=FILE         after migrate/restore + seed, write a gzipped plain pg_dump here
#   FRESH=1               stop NetBox, drop and recreate the database first
#   PYTHON=python3.12     interpreter for NetBox's venv (pyenv's 3.12 if present)
#
# The last lines printed are the env lines to use (eval "$(scripts/netbox_up.sh | grep ^export)"):
#   export NETBOX_URL=http://127.0.0.1:8001
#   export NETBOX_TOKEN=nbt_...
#   export NETBOX_TOKEN_V1=...   (a legacy v1 token, for the live tier's header test)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}   # CI may run without HOME

NB_VERSION=4.7.3
NB_PORT=${NB_PORT:-8001}
NB_PG_PORT=${NB_PG_PORT:-5433}
NB_REDIS_PORT=${NB_REDIS_PORT:-6380}
NB_BASE=${NB_BASE:-$REPO/.netbox-dev/p$NB_PORT}
NB_VENV=${NB_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/netbox-chat/netbox-$NB_VERSION-py3.12}
NB_DUMP=${NB_DUMP:-$REPO/tests/netbox/netbox_chat_seeded.sql.gz}
if [ -z "${PYTHON:-}" ]; then
  PYTHON=$(ls "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -n1 || true)
  [ -n "$PYTHON" ] || PYTHON=$(command -v python3.12 || true)
fi
export NETBOX_ROOT=$NB_BASE/nbroot   # NetBox from the wheel reads $NETBOX_ROOT/conf/configuration.py
# a test-only plugin with an object type of its own (tests/netbox/plugin/netbox_chat_demo)
export PYTHONPATH=$REPO/tests/netbox/plugin${PYTHONPATH:+:$PYTHONPATH}
DB_NAME=netbox DB_USER=netbox DB_PASS=netbox-test-only
PG_SUPER_PASS=postgres-test-only
V2_KEY=chatkey00001                                       # 12 alnum chars
V2_SECRET=0123456789abcdefghij0123456789ABCDEFGHIJ        # 40 alnum chars
V1_SECRET=0123456789abcdef0123456789abcdef01234567        # 40 chars (legacy v1 token)
TOKEN=nbt_${V2_KEY}.${V2_SECRET}
URL=http://127.0.0.1:$NB_PORT
SERVER_PID=$NB_BASE/netbox-server.pid
REDIS_PID=$NB_BASE/redis.pid

T_ALL=$(date +%s.%N)
_t=0
now() { date +%s.%N; }
step() { _t=$(now); echo "--- $*"; }
done_step() { awk -v a="$_t" -v b="$(now)" 'BEGIN{printf "    (%.1fs)\n", b-a}'; }
die() { echo "netbox_up.sh: ERROR: $*" >&2; exit 1; }
nb() { "$NB_VENV/bin/netbox" "$@"; }
as_pg() { runuser -u postgres -- "$@"; }
alive() { [ -f "$1" ] && kill -0 "$(head -n1 "$1")" 2>/dev/null; }
http_code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$@" || true; }

mkdir -p "$NB_BASE" "$NETBOX_ROOT/conf"

step "apt packages (postgresql, redis-server, curl)"
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v curl >/dev/null || need+=(curl)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v pg_config >/dev/null || need+=(libpq-dev)   # psycopg[c] builds against it
if [ ${#need[@]} -gt 0 ]; then
  echo "    installing: ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
echo "    postgres: $PG_BIN"
done_step

step "NetBox $NB_VERSION venv at $NB_VENV"
if ! "$NB_VENV/bin/netbox" version 2>/dev/null | grep -qx "$NB_VERSION"; then
  [ -n "$PYTHON" ] || die "NetBox $NB_VERSION needs Python 3.12 (set PYTHON=/path/to/python3.12)"
  rm -rf "$NB_VENV"
  mkdir -p "$(dirname "$NB_VENV")"
  "$PYTHON" -m venv "$NB_VENV"
  # pip's output goes to a log: this machine's pip config prints a warning per package
  { "$NB_VENV/bin/pip" install --upgrade pip && "$NB_VENV/bin/pip" install "netbox==$NB_VERSION"; } \
    > "$NB_BASE/pip.log" 2>&1 || { tail -30 "$NB_BASE/pip.log"; die "pip install netbox==$NB_VERSION failed"; }
fi
nb version
done_step

step "private PostgreSQL on 127.0.0.1:$NB_PG_PORT"
PGDATA=$NB_BASE/pgdata
if ! as_pg test -x "$NB_BASE"; then
  # the postgres user cannot reach $NB_BASE (a clone under a private folder): keep pgdata elsewhere
  PGDATA=/var/lib/postgresql/netbox-chat-p$NB_PORT
fi
echo "$PGDATA" > "$NB_BASE/pgdata.path"
if [ ! -f "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"; chown postgres:postgres "$PGDATA"; chmod 700 "$PGDATA"
  pwfile=$(mktemp); echo "$PG_SUPER_PASS" > "$pwfile"; chown postgres "$pwfile"
  as_pg "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
fi
if ! as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
  as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $NB_PG_PORT -c unix_socket_directories=$PGDATA -c fsync=off -c full_page_writes=off" >/dev/null
fi
head -n1 "$PGDATA/postmaster.pid" > "$NB_BASE/postgres.pid"
psql_su() { psql -h "$PGDATA" -p "$NB_PG_PORT" -U postgres -v ON_ERROR_STOP=1 -q "$@"; }
for _ in $(seq 50); do psql_su -tAc 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
echo "    pid $(cat "$NB_BASE/postgres.pid"), data $PGDATA"
done_step

step "private redis on 127.0.0.1:$NB_REDIS_PORT"
if ! alive "$REDIS_PID" || ! redis-cli -h 127.0.0.1 -p "$NB_REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
  redis-server --daemonize yes --bind 127.0.0.1 --port "$NB_REDIS_PORT" --save '' --appendonly no \
    --pidfile "$REDIS_PID" --logfile "$NB_BASE/redis.log" --dir "$NB_BASE"
  for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$NB_REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
fi
echo "    pid $(cat "$REDIS_PID")"
done_step

stop_server() {
  if alive "$SERVER_PID"; then
    pid=$(cat "$SERVER_PID"); kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$SERVER_PID"
}

if [ "${FRESH:-0}" = 1 ]; then
  step "FRESH=1: stop NetBox, drop the database, flush its redis"
  stop_server
  psql_su -c "DROP DATABASE IF EXISTS $DB_NAME WITH (FORCE)"
  redis-cli -h 127.0.0.1 -p "$NB_REDIS_PORT" flushall >/dev/null
  done_step
fi

step "database role + database"
NEW_DB=0
psql_su <<SQL
DO \$\$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='$DB_USER') THEN
    CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASS';
  END IF;
END\$\$;
SQL
if ! psql_su -tAc "SELECT 1 FROM pg_database WHERE datname='$DB_NAME'" | grep -q 1; then
  psql_su -c "CREATE DATABASE $DB_NAME OWNER $DB_USER"
  NEW_DB=1
fi
echo "    new database: $NEW_DB"
done_step

step "configuration $NETBOX_ROOT/conf/configuration.py"
touch "$NETBOX_ROOT/conf/__init__.py"
cat > "$NETBOX_ROOT/conf/configuration.py" <<EOF
# Test-only NetBox configuration written by netbox-chat's scripts/netbox_up.sh
ALLOWED_HOSTS = ['127.0.0.1', 'localhost']
DATABASES = {'default': {
    'ENGINE': 'django.db.backends.postgresql',
    'NAME': '$DB_NAME', 'USER': '$DB_USER', 'PASSWORD': '$DB_PASS',
    'HOST': '127.0.0.1', 'PORT': '$NB_PG_PORT', 'CONN_MAX_AGE': 300,
}}
REDIS = {
    'tasks':   {'HOST': '127.0.0.1', 'PORT': $NB_REDIS_PORT, 'USERNAME': '', 'PASSWORD': '', 'DATABASE': 0, 'SSL': False},
    'caching': {'HOST': '127.0.0.1', 'PORT': $NB_REDIS_PORT, 'USERNAME': '', 'PASSWORD': '', 'DATABASE': 1, 'SSL': False},
}
SECRET_KEY = 'test-only-secret-key-netbox-chat-0123456789-abcdefghijklmnopqrstuvwxyz'
# v2 tokens (nbt_<key>.<secret>, sent as 'Bearer') need a pepper of at least 50 characters
API_TOKEN_PEPPERS = {1: 'test-only-pepper-netbox-chat-0123456789-abcdefghijklmnopqrstuvwxyz'}
CENSUS_REPORTING_ENABLED = False
ISOLATED_DEPLOYMENT = True
TIME_ZONE = 'UTC'
PLUGINS = ['netbox_chat_demo']
EOF
done_step

if [ "$NEW_DB" = 1 ] && [ "$NB_DUMP" != none ] && [ -f "$NB_DUMP" ]; then
  step "restore $NB_DUMP (instead of ~10 minutes of migrations)"
  { case "$NB_DUMP" in *.gz) gunzip -c "$NB_DUMP";; *) cat "$NB_DUMP";; esac; } |
    PGPASSWORD=$DB_PASS psql -q -h 127.0.0.1 -p "$NB_PG_PORT" -U "$DB_USER" -d "$DB_NAME" \
      -v ON_ERROR_STOP=1 >/dev/null
  redis-cli -h 127.0.0.1 -p "$NB_REDIS_PORT" flushall >/dev/null   # no stale cache from an older DB
  done_step
elif [ "$NEW_DB" = 1 ]; then
  [ "$NB_DUMP" = none ] || echo "    (no dump at $NB_DUMP: running migrations)"
  step "netbox migrate (slow: ~340 migrations, about 10 minutes)"
  nb migrate --no-input -v 2 > "$NB_BASE/migrate.log" 2>&1 || { tail -30 "$NB_BASE/migrate.log"; exit 1; }
  grep -c ' OK' "$NB_BASE/migrate.log" | sed 's/^/    migrations applied: /'
  done_step
fi

step "migrate the test plugin (netbox_chat_demo)"
nb migrate netbox_chat_demo --no-input -v 0
done_step

step "superuser + API tokens"
nb shell -v 0 <<EOF
from users.models import User, Token
u = User.objects.filter(username='admin').first() or User.objects.create_superuser('admin', 'admin@example.com', 'admin')
if not Token.objects.filter(key='$V2_KEY').exists():
    t = Token(user=u, key='$V2_KEY', token='$V2_SECRET', description='netbox-chat tests v2'); t.full_clean(); t.save()
if not Token.objects.filter(version=1, plaintext='$V1_SECRET').exists():
    t = Token(user=u, version=1, token='$V1_SECRET', description='netbox-chat tests v1'); t.full_clean(); t.save()
print('    tokens:', Token.objects.count())
EOF
done_step

step "start NetBox (gunicorn) on $URL"
if alive "$SERVER_PID" && [ "$(http_code -H "Authorization: Bearer $TOKEN" "$URL/api/status/")" = 200 ]; then
  echo "    already running"
else
  stop_server
  if [ "$(http_code "$URL/")" != 000 ]; then
    die "something else already answers on $URL (not ours: no live pid in $SERVER_PID); set NB_PORT"
  fi
  # NetBox caches /api/schema/ for a day per release: drop it, so it shows the plugins configured now
  redis-cli -h 127.0.0.1 -p "$NB_REDIS_PORT" -n 1 flushdb >/dev/null
  setsid nohup "$NB_VENV/bin/gunicorn" --bind "127.0.0.1:$NB_PORT" --workers 2 --threads 2 --timeout 120 \
    --pid "$SERVER_PID" --chdir "$NB_BASE" netbox.wsgi \
    > "$NB_BASE/netbox-server.log" 2>&1 < /dev/null &
  ok=0
  for _ in $(seq 240); do
    if [ "$(http_code -H "Authorization: Bearer $TOKEN" "$URL/api/status/")" = 200 ]; then ok=1; break; fi
    sleep 0.5
  done
  [ $ok = 1 ] || { tail -30 "$NB_BASE/netbox-server.log"; die "NetBox did not come up on $URL"; }
fi
echo "    pid $(cat "$SERVER_PID")"
done_step

step "seed objects via the REST API (scripts/netbox_seed.py)"
"$NB_VENV/bin/python" "$HERE/netbox_seed.py" "$URL" "$TOKEN"
done_step

if [ -n "${DUMP_OUT:-}" ]; then
  step "dump database to $DUMP_OUT"
  PGPASSWORD=$DB_PASS "$PG_BIN/pg_dump" -h 127.0.0.1 -p "$NB_PG_PORT" -U "$DB_USER" --no-owner --no-privileges "$DB_NAME" |
    gzip -9n > "$DUMP_OUT.tmp"
  mv "$DUMP_OUT.tmp" "$DUMP_OUT"
  ls -la "$DUMP_OUT"
  done_step
fi

step "verify"
curl -s -m 10 -H "Authorization: Bearer $TOKEN" "$URL/api/status/" |
  "$NB_VENV/bin/python" -c 'import json,sys; print("    netbox", json.load(sys.stdin)["netbox-version"])'
done_step

awk -v a="$T_ALL" -v b="$(now)" 'BEGIN{printf "=== NetBox up in %.0fs\n", b-a}'
echo "    pids: netbox-server $(cat "$SERVER_PID"), redis $(cat "$REDIS_PID"), postgres $(cat "$NB_BASE/postgres.pid") (stop: scripts/netbox_down.sh)"
echo "export NETBOX_URL=$URL"
echo "export NETBOX_TOKEN=$TOKEN"
echo "export NETBOX_TOKEN_V1=$V1_SECRET   # optional: the live tier also tries a v1 token"
