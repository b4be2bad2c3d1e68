#!/usr/bin/env bash
# Run the benchmarks one after the other; figures go to stdout.
# Each is bounded (well under 10 minutes); the first run also builds the
# cached sessions (about 1-2 minutes) under ${NETBOX_CHAT_BENCH_CACHE:-/tmp/netbox-chat-bench}.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
for bench in bench_ls bench_startup bench_cancel bench_size bench_request bench_persist bench_habits bench_context bench_eval bench_render; do
    "$py" -W ignore "bench/$bench.py"
    echo
done
# 7 needs a PostgreSQL (scripts/postgres_up.sh prints NETBOX_CHAT_TEST_PG)
if [ -n "${NETBOX_CHAT_TEST_PG:-}" ]; then
    "$py" -W ignore bench/bench_postgres.py
else
    echo "bench 9 (bench_postgres.py) skipped: set NETBOX_CHAT_TEST_PG (scripts/postgres_up.sh)"
fi
