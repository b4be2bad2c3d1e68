"""Benchmark 1: `netbox-chat ls` over 1,000 sessions of 20 turns, cold process.

One real 20-turn session (real Conversation, real ChatOllama, scripted Ollama
server) is copied 1,000 times under new ids: `ls` reads only our small tables
(session_meta, turns), so copies are as good as 1,000 separately built files.
Each measurement is a new process; baseline and `ls` runs are interleaved.

Targets: `ls` at most 2x the baseline `python -c "import typer, rich"`
(issue 7); `ls --json`, which reads every session, under 3x (issue 32).
`ls --json` is timed with the folder's summary index as the previous
`ls --json` left it (warm: every file unchanged since) and with no index
(cold: removed before each run, so every file is opened and the index
written again). The files are left 2.5 s to age first: an index keeps no
entry for a file changed in the last 2 s (`netbox_chat/store/lsindex.py`).

`--against REV` also times `ls` and `ls --json` of `netbox_chat/` as
committed at REV (git archive, first on PYTHONPATH), interleaved with today's
in the same run, on the same files.

    .venv/bin/python bench/bench_ls.py [--sessions 1000] [--runs 10] [--against REV]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import _common as C

WARM = "netbox-chat ls --json (warm index)"
COLD = "netbox-chat ls --json (cold: no index)"


def make_store(template: Path, into: Path, count: int) -> None:
    """`count` copies of the 20-turn session file, each under a new id."""
    from netbox_chat.store.ids import new_session_id

    source = next(template.glob("*.sqlite"))
    into.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    while len(seen) < count:
        sid = new_session_id()
        if sid in seen:
            continue
        seen.add(sid)
        shutil.copyfile(source, into / f"{sid}.sqlite")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--against", metavar="REV", help="also time ls of this revision")
    args = parser.parse_args()

    C.header("bench 1: `netbox-chat ls` cold process")
    cached = C.cached_sessions()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(C.temp_dir("nbc-bench-ls-"))
        old = stack.enter_context(C.code_of_revision(args.against)) if args.against else None
        store = tmp / "sessions"
        make_store(cached["stages"][20], store, args.sessions)
        from netbox_chat.store.lsindex import INDEX_NAME, RACY_SECONDS

        index = store / INDEX_NAME
        time.sleep(RACY_SECONDS + 0.5)
        files = list(store.glob("*.sqlite"))
        total = sum(f.stat().st_size for f in files)
        print(f"store: {len(files)} sessions of 20 turns, {total / 1e6:.0f} MB")

        env = C.bench_env(NETBOX_CHAT_SESSIONS=str(store))
        old_env = {**env, "PYTHONPATH": str(old)} if old else env
        baseline = [C.PYTHON, "-c", "import typer, rich"]
        commands = {
            "baseline: python -c 'import typer, rich'": (baseline, env),
            "netbox-chat ls": ([C.NETBOX_CHAT, "ls"], env),
            WARM: ([C.NETBOX_CHAT, "ls", "--json"], env),
            COLD: ([C.NETBOX_CHAT, "ls", "--json"], env),
            "netbox-chat --help": ([C.NETBOX_CHAT, "--help"], env),
            "what-if prototype (bench/_ls_prototype.py)": (
                [C.PYTHON, str(Path(__file__).with_name("_ls_prototype.py")), "ls"],
                env,
            ),
        }
        if old:
            commands[f"{args.against} ls"] = ([C.NETBOX_CHAT, "ls"], old_env)
            commands[f"{args.against} ls --json"] = ([C.NETBOX_CHAT, "ls", "--json"], old_env)
            imported = subprocess.run(
                [C.PYTHON, "-c", "import netbox_chat; print(netbox_chat.__file__)"],
                env=old_env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert imported.startswith(str(old)), f"{args.against} not the code run: {imported}"
        # Warm the OS page cache and write any missing .pyc files first.
        for argv, argv_env in commands.values():
            C.timed_run(argv, argv_env)
        before = {f: f.stat().st_mtime_ns for f in files}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, argv_env) in commands.items():
                if name == COLD:
                    index.unlink(missing_ok=True)
                times[name].append(C.timed_run(argv, argv_env))
        index_bytes = index.stat().st_size if index.exists() else 0
        written = [f for f in files if f.stat().st_mtime_ns != before[f]]
        leftovers = [p for p in store.iterdir() if not p.name.endswith(".sqlite") and p != index]

        # Where the time goes, in one process (no interpreter start-up).
        probe = (
            "import time;t=time.perf_counter();"
            "import netbox_chat.cli.app;t1=time.perf_counter();"
            "import io,os,pathlib;from netbox_chat.ui import tables;"
            "from netbox_chat.store.sessions import SessionStore;from rich.console import Console;"
            "s=SessionStore(pathlib.Path(os.environ['NETBOX_CHAT_SESSIONS']));"
            "t2=time.perf_counter();x=s.list_sessions();t3=time.perf_counter();"
            "Console(file=io.StringIO(),width=100).print(tables.sessions_table(x));"
            "t4=time.perf_counter();"
            "print(f'{(t1-t)*1000:.0f} {(t3-t2)*1000:.0f} {(t4-t3)*1000:.0f}')"
        )
        out = subprocess.run(
            [C.PYTHON, "-c", probe], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        imports_ms, listing_ms, render_ms = (float(v) for v in out)
        # Modules `ls` loads that it has no use for (Typer 0.29's pydantic
        # option adapters, asyncio, Markdown, the prompt, LangChain).
        modules_probe = (
            "import sys,contextlib;sys.argv=['netbox-chat','ls'];"
            "from netbox_chat.cli.app import main\n"
            "with contextlib.suppress(SystemExit): main()\n"
            "heavy=('pydantic','asyncio','rich.markdown','markdown_it','rich.live',"
            "'prompt_toolkit','langchain_core','deepagents')\n"
            "print(' '.join(m for m in heavy if m in sys.modules) or 'none',file=sys.stderr)"
        )
        needless = (
            subprocess.run(
                [C.PYTHON, "-c", modules_probe], env=env, capture_output=True, text=True, check=True
            )
            .stderr.strip()
            .splitlines()[-1]
        )

    base = statistics.median(times[next(iter(commands))])
    print(f"\n{'command':44} {'median':>9} {'min':>9} {'max':>9} {'x base':>7}")
    for name, values in times.items():
        s = C.summary(values)
        print(
            f"{name:44} {s['median'] * 1000:7.0f}ms {s['min'] * 1000:7.0f}ms "
            f"{s['max'] * 1000:7.0f}ms {s['median'] / base:6.2f}x"
        )
    ratio = statistics.median(times["netbox-chat ls"]) / base
    print(
        f"\nin-process: import netbox_chat.cli.app {imports_ms:.0f} ms; "
        f"list_sessions() over {len(files)} files {listing_ms:.0f} ms "
        f"({listing_ms / len(files) * 1000:.0f} us a file); "
        f"rich table of {len(files)} rows {render_ms:.0f} ms; "
        f"modules `ls` loads needlessly: {needless}"
    )
    print(f"ls wrote to session files: {len(written)}; files left beside them: {len(leftovers)}")
    print(f"summary index: {index_bytes / 1e6:.1f} MB for {len(files)} sessions")
    print(f"TARGET ls <= 2.0x baseline: {ratio:.2f}x -> {'met' if ratio <= 2.0 else 'NOT met'}")
    json_ratio = statistics.median(times[WARM]) / base
    verdict = "met" if json_ratio < 3.0 else "NOT met"
    print(f"TARGET ls --json < 3.0x baseline (warm index): {json_ratio:.2f}x -> {verdict}")
    cold_ratio = statistics.median(times[COLD]) / base
    print(f"ls --json with no index (cold, writes it): {cold_ratio:.2f}x")


if __name__ == "__main__":
    main()
