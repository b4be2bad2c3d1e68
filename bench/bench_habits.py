"""Benchmark 7: shell completion of session ids and `ls --grep`, 1,000 sessions.

Each session file holds the ledger of 20 finished turns (questions and
Markdown answers as in the other benchmarks) and no checkpoint tables:
completion reads only the folder and `session_meta`, `ls --grep` only the
`turns` table, so the checkpoints would be pages nobody reads. Every
measurement is a new process, run the way the shell runs it (Typer's
completion protocol through the installed `netbox-chat`).

Targets (issue 15): completion under 100 ms for 1,000 sessions; `ls --grep`
decides whether SQLite's FTS5 is needed (it is if a search takes seconds).

    .venv/bin/python bench/bench_habits.py [--sessions 1000] [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import _common as C
from bench_ls import make_store

sys.path.insert(0, str(C.ROOT))


def make_template(folder: Path, turns: int = 20) -> Path:
    from netbox_chat.store.sessions import SessionFile, SessionStore

    with SessionFile.create(
        SessionStore(folder), model="qwen3:8b", netbox_url="http://netbox.example:8000"
    ) as session:
        for turn in range(1, turns + 1):
            number = session.begin_turn(
                C.question_for(turn), base_checkpoint_id=None, base_message_count=0
            )
            session.finish_turn(number, "done", answer=C.answer_for(turn), message_count=2 * turn)
        return session.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    C.header("bench 7: completion of session ids and `ls --grep`, cold process")
    with C.temp_dir("nbc-bench-habits-") as tmp:
        template = make_template(tmp / "template")
        store = tmp / "sessions"
        make_store(template.parent, store, args.sessions)  # copies of the one file there
        one = sorted(p.stem for p in store.glob("*.sqlite"))[0]
        print(f"store: {args.sessions} sessions of 20 turns, {template.stat().st_size} B each")

        env = C.bench_env(NETBOX_CHAT_SESSIONS=str(store), XDG_CONFIG_HOME=str(tmp / "cfg"))
        bash = {"_NETBOX_CHAT_COMPLETE": "complete_bash"}
        zsh = {"_NETBOX_CHAT_COMPLETE": "complete_zsh"}
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "baseline: python -c 'import typer, rich'": (
                [C.PYTHON, "-c", "import typer, rich"],
                {},
            ),
            f"complete `resume <Tab>` (all {args.sessions} ids, bash)": (
                [C.NETBOX_CHAT],
                {**bash, "COMP_WORDS": "netbox-chat resume ", "COMP_CWORD": "2"},
            ),
            "complete `resume XY<Tab>` (ids + titles, zsh)": (
                [C.NETBOX_CHAT],
                {**zsh, "_TYPER_COMPLETE_ARGS": f"netbox-chat resume {one[:2]}"},
            ),
            "complete `<Tab>` (commands, bash)": (
                [C.NETBOX_CHAT],
                {**bash, "COMP_WORDS": "netbox-chat ", "COMP_CWORD": "1"},
            ),
            "complete `resume --<Tab>` (options + help, zsh)": (
                [C.NETBOX_CHAT],
                {**zsh, "_TYPER_COMPLETE_ARGS": "netbox-chat resume --"},
            ),
            "netbox-chat ls": ([C.NETBOX_CHAT, "ls"], {}),
            "netbox-chat ls --grep dm-nashua (every session)": (
                [C.NETBOX_CHAT, "ls", "--grep", "dm-nashua"],
                {},
            ),
            "netbox-chat ls --grep no-such-text (none)": (
                [C.NETBOX_CHAT, "ls", "--grep", "no-such-text"],
                {},
            ),
        }
        # `ls --grep` exits 1 when no session matches, as grep does (README).
        status = {name: 1 if name.endswith("(none)") else 0 for name in commands}
        for name, (argv, extra) in commands.items():  # warm the page cache and .pyc files
            C.timed_run(argv, {**env, **extra}, status=status[name])
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, extra) in commands.items():
                times[name].append(C.timed_run(argv, {**env, **extra}, status=status[name]))

        # The work itself, in one process (no interpreter start-up, no imports).
        probe = (
            "import time\n"
            "from netbox_chat.cli.completion import SessionIdWord, session_id_choices\n"
            "from netbox_chat.config import resolve_settings\n"
            "from netbox_chat.store.sessions import SessionStore\n"
            "def best(f):\n"
            "    runs = []\n"
            "    for _ in range(5):\n"
            "        t = time.perf_counter(); f(); runs.append(time.perf_counter() - t)\n"
            "    return min(runs) * 1000\n"
            "store = SessionStore(resolve_settings().sessions_dir)\n"
            f"print(best(lambda: session_id_choices(SessionIdWord(''))),"
            f" best(lambda: session_id_choices(SessionIdWord({one[:2]!r}))),"
            " best(lambda: store.search('no-such-text')))\n"
        )
        out = subprocess.run(
            [C.PYTHON, "-c", probe], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        all_ids_ms, few_ids_ms, search_ms = (float(v) for v in out)

    print()
    C.times_table(times, 52)
    print(
        f"\nin-process: session_id_choices('') over {args.sessions} ids {all_ids_ms:.1f} ms; "
        f"with a 2-character prefix (titles read) {few_ids_ms:.1f} ms; "
        f"SessionStore.search over {args.sessions} ledgers {search_ms:.0f} ms"
    )
    worst = max(statistics.median(v) for k, v in times.items() if k.startswith("complete"))
    grep = max(statistics.median(v) for k, v in times.items() if "--grep" in k)
    print(
        f"\nTARGET completion < 100 ms at {args.sessions} sessions: slowest median "
        f"{worst * 1000:.0f} ms -> {'met' if worst < 0.1 else 'NOT met'}"
    )
    print(
        f"ls --grep over {args.sessions} sessions: slowest median {grep * 1000:.0f} ms "
        f"({'FTS5 not needed' if grep < 1.0 else 'consider FTS5'}: a LIKE scan of the ledgers)"
    )


if __name__ == "__main__":
    main()
