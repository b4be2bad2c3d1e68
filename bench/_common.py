"""Shared pieces of the benchmarks: the machine line, scripted turns, bench tools,
building a Conversation against the scripted Ollama server, and the cached long
sessions (10, 20, 50, 100 and 500 turns) that several benchmarks start from.

Nothing here is imported by netbox_chat or the tests. Heavy imports (deepagents)
happen inside functions, so the cold-process benchmarks can import this module
for their helpers without paying for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CODE_ENV = "NETBOX_CHAT_BENCH_CODE"
"""Set (by `figures_of_revision`) to a folder holding another revision's
`netbox_chat/`: the benchmark then measures that code, with this tree's bench
helpers and test doubles, so both sets of figures come from the same harness.
Its cached sessions are the same turns written by its own code: a revision
from before a ledger migration refuses a file today's code wrote (made by a
newer netbox-chat)."""
CODE = Path(os.environ[CODE_ENV]) if os.environ.get(CODE_ENV) else ROOT
if CODE != ROOT:
    sys.path.insert(0, str(CODE))

PYTHON = str(ROOT / ".venv" / "bin" / "python")
NETBOX_CHAT = str(ROOT / ".venv" / "bin" / "netbox-chat")

CACHE = Path(
    os.environ.get("NETBOX_CHAT_BENCH_CACHE") or Path(tempfile.gettempdir()) / "netbox-chat-bench"
)
STAGES = (10, 20, 50, 100, 500)
"""Turn counts at which the builder closes the session and keeps a copy."""

BUILDER_VERSION = "1"
"""Bump when the shape of the generated turns changes (forces a rebuild)."""
STALE_SECONDS = 24 * 3600
"""A cached session folder unused this long is removed when another is built."""
SHAPING_MODULES = (
    "store/sessions.py",
    "store/migrations.py",
    "store/ledger.py",
    "checkpoints/sqlite.py",
    "agent/graph.py",
    "agent/turns.py",
    "config.py",
)
"""The modules whose code shapes a session file: the cache is rebuilt when they change."""

# The prompt `netbox> ` as prompt_toolkit draws it: style escapes between the word
# and the ">", and the trailing space drawn as a cursor move, not a character.
PROMPT_RE = re.compile(rb"netbox(?:\x1b\[[0-9;?]*[A-Za-z])*>")

# --- what the scripted turns look like ---------------------------------------------------

SITES = ("dm-akron", "dm-binghamton", "dm-camden", "dm-nashua", "ncsu-065", "jbb-branch-104")


def question_for(turn: int) -> str:
    site = SITES[turn % len(SITES)]
    return f"Turn {turn}: which devices at {site} are offline, and since when?"


def answer_for(turn: int) -> str:
    site = SITES[turn % len(SITES)]
    rows = "\n".join(
        f"| {site}-sw{n:02d} | {site} | offline | 2026-11-{10 + n:02d} |" for n in range(1, 5)
    )
    return (
        f"**4 devices** at {site} are offline (turn {turn}).\n\n"
        "| name | site | status | since |\n|---|---|---|---|\n" + rows
    )


def tool_result(site: str) -> str:
    """A NetBox-shaped result of about 1 kB."""
    rows = [
        {
            "id": 100 + n,
            "name": f"{site}-sw{n:02d}",
            "site": {"slug": site},
            "status": {"value": "offline"},
            "role": {"slug": "access-switch"},
            "last_updated": f"2026-11-{10 + n:02d}T08:00:00Z",
        }
        for n in range(1, 5)
    ]
    return json.dumps({"count": 4, "results": rows})


def uses_tool(turn: int) -> bool:
    """Every second turn calls one tool, the others answer straight away."""
    return turn % 2 == 0


def turn_number(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "user")


def instant_responder(body: dict[str, Any]) -> list[Any]:
    """Answers at once: a tool call on even turns, then the answer."""
    from tests.doubles.ollama_server import Text, ToolCall

    turn = turn_number(body)
    last = (body.get("messages") or [{}])[-1].get("role")
    if last == "user" and uses_tool(turn):
        return [ToolCall("list_devices", {"site": SITES[turn % len(SITES)], "status": "offline"})]
    return [Text(answer_for(turn))]


# --- bench tools (injected instead of the NetBox tools) -------------------------------------


def bench_tools(slow_seconds: float = 1.0) -> list[Any]:
    from langchain_core.tools import tool

    @tool
    async def list_devices(site: str, status: str = "") -> str:
        """List NetBox devices at a site, optionally filtered by status (fast)."""
        await asyncio.sleep(0)
        return tool_result(site)

    @tool
    async def slow_inventory(site: str) -> str:
        """Collect a full inventory of a site (slow)."""
        await asyncio.sleep(slow_seconds)
        return tool_result(site)

    return [list_devices, slow_inventory]


def settings_for(sessions_dir: Path, ollama_url: str) -> Any:
    from netbox_chat.config import resolve_settings

    # No automatic compaction: see bench_env.
    env = {"NETBOX_CHAT_COMPACT_AT": "0"}
    return resolve_settings(sessions_dir=sessions_dir, ollama_url=ollama_url, env=env)


def open_conversation(session: Any, settings: Any, tools: Sequence[Any], saver: Any = None) -> Any:
    """A Conversation on `session` with injected tools (no NetBox client)."""
    from netbox_chat.agent.graph import build_agent, find_end_node
    from netbox_chat.agent.turns import Conversation
    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

    if saver is None:
        saver = BridgedSqliteSaver(session.db, session.id)
    graph = build_agent(settings, tools, saver)
    return Conversation(session, graph, saver, find_end_node(graph))


def close_conversation(conversation: Any) -> None:
    conn = getattr(conversation.saver, "conn", None)
    if conn is not None:
        conn.close()


# --- the cached long sessions ------------------------------------------------------------------


def code_fingerprint() -> str:
    """Changes whenever the code that shapes a session file changes (the
    code measured: this tree's, or the revision's under `CODE_ENV`)."""
    digest = hashlib.sha256(BUILDER_VERSION.encode())
    for name in SHAPING_MODULES:
        path = CODE / "netbox_chat" / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()[:12]


def session_bytes(path: Path) -> int:
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def cached_sessions(log: Callable[[str], None] = print) -> dict[str, Any]:
    """The cached sessions, built once per code fingerprint.

    Returns {"dir": Path, "id": str, "stages": {turns: Path}, "sizes": {...},
    "build_seconds": {...}}.
    """
    folder = CACHE / f"sessions-{code_fingerprint()}"
    manifest = folder / "manifest.json"
    if manifest.exists():
        folder.touch()  # in use: not stale
        data = json.loads(manifest.read_text())
        data["dir"] = folder
        data["stages"] = {int(k): folder / v for k, v in data["stages"].items()}
        return data
    log(f"building cached sessions in {folder} (once per code version, about 1-2 min)...")
    # Another revision's cache (`--against`) may be in use beside this one:
    # only caches left unused for a day go.
    for stale in CACHE.glob("sessions-*"):
        if time.time() - stale.stat().st_mtime > STALE_SECONDS:
            shutil.rmtree(stale, ignore_errors=True)
    folder.mkdir(parents=True)
    data = asyncio.run(_build(folder, log))
    manifest.write_text(
        json.dumps({**data, "stages": {k: str(v.name) for k, v in data["stages"].items()}})
    )
    data["dir"] = folder
    data["stages"] = {int(k): folder / v.name for k, v in data["stages"].items()}
    return data


async def _build(folder: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama

    work = folder / "work"
    store = SessionStore(work)
    stages: dict[int, Path] = {}
    sizes: dict[int, int] = {}
    seconds: dict[int, float] = {}
    with ScriptedOllama(lifetime=1800) as ollama:
        ollama.responder = instant_responder
        settings = settings_for(work, ollama.url)
        session = SessionFile.create(store, model=settings.model)
        session_id = session.id
        session.close()
        done = 0
        started = time.monotonic()
        for stage in STAGES:
            # Reopen for each stage, as a user would, so each stage's size is
            # the file as it stays on disk once closed (WAL folded back in).
            session = SessionFile.open(store, session_id)
            conversation = open_conversation(session, settings, bench_tools())
            try:
                while done < stage:
                    done += 1
                    outcome = await conversation.run_turn(question_for(done))
                    if outcome.status != "done":
                        raise RuntimeError(f"turn {done} {outcome.status}: {outcome.error}")
            finally:
                close_conversation(conversation)
                session.close()
            path = store.path_for(session_id)
            sizes[stage] = session_bytes(path)
            seconds[stage] = round(time.monotonic() - started, 1)
            copy = folder / f"turns-{stage}"
            copy.mkdir()
            shutil.copy2(path, copy / path.name)
            stages[stage] = copy
            log(f"  {stage} turns: {sizes[stage]:,} bytes, {seconds[stage]} s so far")
    shutil.rmtree(work)
    return {"id": session_id, "stages": stages, "sizes": sizes, "build_seconds": seconds}


def fresh_copy(source_dir: Path, into: Path) -> Path:
    """Copy a cached sessions folder (so a benchmark may write to it)."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(source_dir, into)
    return into


# --- the machine and the figures --------------------------------------------------------------


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{today} · nproc {os.cpu_count()} · {model} · Python {platform.python_version()} "
        f"· {platform.system()} {platform.release()}"
    )


def code_version() -> str:
    """The commit measured, and whether netbox_chat/ had uncommitted changes."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "netbox_chat"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" + uncommitted changes in netbox_chat/" if dirty else "")


def header(title: str) -> None:
    print(f"# {title}")
    print(f"machine: {machine()}")
    print(f"code: {code_version()}")


@contextlib.contextmanager
def code_of_revision(revision: str) -> Iterator[Path]:
    """A temporary folder holding `netbox_chat/` as committed at `revision`
    (`git archive`, no checkout), compiled: put it first on PYTHONPATH to run
    that revision with this tree's everything else."""
    with temp_dir("nbc-bench-code-") as code:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "netbox_chat"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
        # Compiled as this tree is before a run (README: PYTHONDONTWRITEBYTECODE
        # is set here): uncompiled, every start of REV would compile it too.
        subprocess.run([PYTHON, "-m", "compileall", "-q", str(code / "netbox_chat")], check=True)
        yield code


def figures_of_revision(script: str, revision: str, args: Sequence[str]) -> dict[str, Any]:
    """Run a benchmark on `netbox_chat/` as committed at `revision` and
    return the figures it wrote (`--figures FILE`), for a side-by-side table.

    The revision's package is extracted with `git archive` into a temporary
    folder (no checkout, no worktree) and compiled; everything else is this
    tree's.
    """
    with code_of_revision(revision) as code:
        figures = code / "figures.json"
        print(f"measuring {revision} first (netbox_chat/ from git archive)...", flush=True)
        subprocess.run(
            [PYTHON, str(Path(__file__).with_name(script)), *args, "--figures", str(figures)],
            env={**os.environ, CODE_ENV: str(code)},
            stdout=subprocess.DEVNULL,
            check=True,
        )
        return dict(json.loads(figures.read_text()))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "p95": p95,
        "min": ordered[0],
        "max": ordered[-1],
    }


def times_table(times: dict[str, list[float]], width: int, indent: str = "") -> None:
    """Prints each command's runs (seconds, by name) as median, min and max,
    its median against the first row's, the baseline: one layout for every
    bench that compares commands, so their tables read alike."""
    base = statistics.median(times[next(iter(times))])
    print(f"{indent}{'command':{width}} {'median':>9} {'min':>9} {'max':>9} {'x base':>7}")
    for name, values in times.items():
        s = summary(values)
        print(
            f"{indent}{name:{width}} {s['median'] * 1000:7.0f}ms {s['min'] * 1000:7.0f}ms "
            f"{s['max'] * 1000:7.0f}ms {s['median'] / base:6.2f}x"
        )


def timed_run(argv: Sequence[str], env: dict[str, str] | None = None, *, status: int = 0) -> float:
    """Wall time of one cold process, output discarded; fails loudly on any
    exit status but the one expected."""
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != status:
        raise RuntimeError(f"{argv} exited {result.returncode}: {result.stderr.decode()[-500:]}")
    return elapsed


def bench_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NETBOX_", "OLLAMA_")) and k != "PYTHONPATH"
    }
    env.update(
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm-256color",
        COLUMNS="100",
        LINES="40",
        # The cached sessions are long on purpose (the worst case for a turn's
        # own overhead and for Ctrl-C); automatic compaction would shrink them
        # on the first turn, and the scripted replies do not answer summaries.
        NETBOX_CHAT_COMPACT_AT="0",
    )
    if CODE != ROOT:
        env["PYTHONPATH"] = str(CODE)  # a child REPL runs the measured revision too
    env.update(extra)
    return env


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
