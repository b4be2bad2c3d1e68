#!/usr/bin/env bash
# Run the benchmarks one after the other; figures go to stdout.
# Each is bounded (well under 10 minutes); the first run also builds the
# cached sessions (about 1-2 minutes) under ${NETBOX_CHAT_BENCH_CACHE:-/tmp/netbox-chat-bench}.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
for bench in bench_ls bench_startup bench_cancel bench_size bench_request bench_persist bench_habits bench_context; do
    "$py" -W ignore "bench/$bench.py"
    echo
done
