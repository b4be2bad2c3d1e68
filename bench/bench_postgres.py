"""Benchmark 9: the PostgreSQL store beside the session folder, in one run.

1. `netbox-chat ls` over 1,000 sessions of 20 turns, cold process, runs
   interleaved: a folder of 1,000 copies of the cached 20-turn session file
   (as bench 1 makes it) against a database holding 1,000 copies of the same
   session (one `netbox-chat copy`, then its rows duplicated under new ids in
   SQL: `ls` reads only the ledger tables, so copies are as good as sessions
   built one by one).
2. Ctrl-C to prompt on the cached 500-turn session: bench 3's loop (the real
   REPL through a pty, SIGINT at a random moment of a turn, until the prompt
   is back after the rollback), once on a folder copy and once on a database
   copy made with `netbox-chat copy`.

Needs a PostgreSQL: NETBOX_CHAT_TEST_PG (scripts/postgres_up.sh). The script
works in a scratch database of its own, created and dropped again.

    .venv/bin/python bench/bench_postgres.py [--sessions 1000] [--runs 10] [--cancels 30]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import _common as C
from bench_cancel import SLOW_TOOL, Clock, cancel_in_repl, cancel_moments, responder
from bench_ls import make_store

# Each session's rows, by table and the column that names the session.
TABLES = (
    ("checkpoints", "thread_id"),
    ("checkpoint_blobs", "thread_id"),
    ("checkpoint_writes", "thread_id"),
    ("session_meta", "session_id"),
    ("turns", "session_id"),
    ("history_edits", "session_id"),
)


@contextlib.contextmanager
def scratch_database(url: str) -> Iterator[str]:
    """A new database with the netbox-chat schema, dropped afterwards."""
    from netbox_chat.checkpoints.postgres import setup_tables
    from netbox_chat.store import postgres as pgstore

    name = f"netbox_chat_bench_{uuid.uuid4().hex[:8]}"
    scratch = urlsplit(url)._replace(path=f"/{name}").geturl()
    with contextlib.closing(pgstore.connect(url)) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        with contextlib.closing(pgstore.connect(scratch)) as conn:
            pgstore.migrate(conn)
            setup_tables(conn)
        yield scratch
    finally:
        with contextlib.closing(pgstore.connect(url)) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def copy_in(folder: Path, session_id: str, url: str) -> float:
    """`netbox-chat copy` of one session file into the database; its seconds."""
    env = C.bench_env(NETBOX_CHAT_SESSIONS=str(folder))
    started = time.perf_counter()
    subprocess.run(
        [C.NETBOX_CHAT, "copy", session_id, "--to", url], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - started


def duplicate(url: str, template: str, count: int) -> None:
    """`count` copies of session `template`'s rows under new ids, in SQL."""
    from netbox_chat.store import postgres as pgstore
    from netbox_chat.store.ids import new_session_id

    ids: set[str] = set()
    while len(ids) < count - 1:  # with the template, `count` sessions
        ids.add(new_session_id())
        ids.discard(template)
    with contextlib.closing(pgstore.connect(url)) as conn, conn.transaction():
        for table, column in TABLES:
            columns = [
                name
                for (name,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    (pgstore.SCHEMA, table),
                ).fetchall()
                if not (table == "history_edits" and name == "id")
            ]
            picked = ", ".join("n.id" if name == column else f"t.{name}" for name in columns)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} "
                f"FROM {table} t, unnest(%s::text[]) AS n(id) WHERE t.{column} = %s",
                (sorted(ids), template),
            )
    with contextlib.closing(pgstore.connect(url)) as conn:
        conn.execute("ANALYZE")


def part_ls(cached: dict[str, Any], url: str, sessions: int, runs: int) -> dict[str, Any]:
    with C.temp_dir("nbc-bench-pg-ls-") as tmp:
        folder = tmp / "sessions"
        make_store(cached["stages"][20], folder, sessions - 1)
        template = tmp / "template"
        C.fresh_copy(cached["stages"][20], template)
        shutil.copy(next(template.glob("*.sqlite")), folder)
        copy_seconds = copy_in(template, cached["id"], url)
        duplicate(url, cached["id"], sessions)
        folder_env = C.bench_env(NETBOX_CHAT_SESSIONS=str(folder))
        pg_env = C.bench_env(NETBOX_CHAT_STORE=url)
        commands = {
            "baseline: python -c 'import typer, rich'": (
                [C.PYTHON, "-c", "import typer, rich"],
                folder_env,
            ),
            "ls, folder": ([C.NETBOX_CHAT, "ls"], folder_env),
            "ls, PostgreSQL": ([C.NETBOX_CHAT, "ls"], pg_env),
            "ls --json, folder": ([C.NETBOX_CHAT, "ls", "--json"], folder_env),
            "ls --json, PostgreSQL": ([C.NETBOX_CHAT, "ls", "--json"], pg_env),
        }
        for argv, env in commands.values():  # warm caches and .pyc files
            C.timed_run(argv, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (argv, env) in commands.items():
                times[name].append(C.timed_run(argv, env))
        listed = subprocess.run(
            [C.NETBOX_CHAT, "ls", "--json"], env=pg_env, capture_output=True, text=True, check=True
        ).stdout.count('"id"')
    return {"times": times, "copy_seconds": copy_seconds, "listed": listed}


def part_cancel(cached: dict[str, Any], url: str, cancels: int, seed: int) -> dict[str, Any]:
    from tests.doubles.ollama_server import ScriptedOllama

    results: dict[str, Any] = {}
    with C.temp_dir("nbc-bench-pg-cancel-") as tmp:
        folder = C.fresh_copy(cached["stages"][500], tmp / "sessions")
        results["copy_seconds"] = copy_in(folder, cached["id"], url)
        for kind, store in (
            ("folder", {"NETBOX_CHAT_SESSIONS": str(folder)}),
            ("PostgreSQL", {"NETBOX_CHAT_STORE": url}),
        ):
            clock = Clock()
            with ScriptedOllama(lifetime=900) as ollama:
                ollama.responder = responder(clock)
                env = C.bench_env(
                    **store,
                    OLLAMA_HOST=ollama.url,
                    NETBOX_URL="http://127.0.0.1:9",
                    NETBOX_CHAT_BENCH_SLOW_TOOL=str(SLOW_TOOL),
                )
                print(f"{kind}:", end=" ", flush=True)
                moments = cancel_moments(cancels, 0, random.Random(seed))
                results[kind] = cancel_in_repl(env, cached["id"], moments, clock)
        results["rows"] = thread_rows(url, cached["id"])
    return results


def thread_rows(url: str, session_id: str) -> dict[str, int]:
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(url, read_only=True)) as conn:
        return {
            table: pgstore.scalar(
                conn, f"SELECT count(*) FROM {table} WHERE {column} = %s", (session_id,)
            )
            for table, column in TABLES[:3]
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cancels", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    url = os.environ.get("NETBOX_CHAT_TEST_PG")
    if not url:
        sys.exit("bench_postgres.py needs NETBOX_CHAT_TEST_PG (scripts/postgres_up.sh)")

    C.header("bench 9: the PostgreSQL store beside the session folder")
    cached = C.cached_sessions()
    with scratch_database(url) as scratch:
        ls = part_ls(cached, scratch, args.sessions, args.runs)
    with scratch_database(url) as scratch:
        cancel = part_cancel(cached, scratch, args.cancels, args.seed)

    print(
        f"\n1. ls over {args.sessions} sessions of 20 turns, cold process, {args.runs} runs each "
        f"(database listed {ls['listed']}; `copy` of the 20-turn session took "
        f"{ls['copy_seconds']:.1f} s)"
    )
    C.times_table(ls["times"], 42, indent="   ")
    print(
        f"\n2. Ctrl-C -> prompt back (rolled back), 500-turn session, real REPL "
        f"(`copy` of the 500-turn session took {cancel['copy_seconds']:.1f} s)"
    )
    for kind in ("folder", "PostgreSQL"):
        run = cancel[kind]
        values = [t for t, _ in run["times"]]
        if not values:
            print(f"   {kind:11} no cancel landed inside a turn")
            continue
        s = C.summary(values)
        print(
            f"   {kind:11} {s['n']} cancels: median {C.ms(s['median'])}, p95 {C.ms(s['p95'])}, "
            f"max {C.ms(s['max'])}; unverified {run['unverified']}, too late {run['late']}"
        )
    print(f"   database rows of the session afterwards: {cancel['rows']}")


if __name__ == "__main__":
    main()
