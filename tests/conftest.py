"""Shared fixtures: a scripted Ollama server, a NetBox double, a fresh sessions
folder, and the environment the real CLI reads."""

from __future__ import annotations

import compileall
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.doubles import ROOT
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama
from tests.doubles.openai_server import DIALECTS, ScriptedOpenAI, server_env
from tests.doubles.stores import StoreUnderTest, database_url, empty_database
from tests.doubles.wire import OLLAMA_V1

TEST_TOKEN = "nbt_testkey00001.0123456789abcdefghij0123456789ABCDEFGHIJ"

# Every history the bridge keeps between turns is compared with a fresh decode
# on each reuse, here and in the CLI processes the tests start (they inherit
# os.environ, or get chat_env): every path the suite drives proves the kept
# history equals the store (netbox_chat.checkpoints.sqlite.HistoryCache).
os.environ["NETBOX_CHAT_CHECK_HISTORY_CACHE"] = "1"


MODEL_SERVERS = ("ollama", *(OLLAMA_V1 if d == "ollama" else d for d in DIALECTS))
"""Every model server a test can run on: Ollama's API, then each /v1 dialect."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`@pytest.mark.model_servers(...)` runs a test once per model server (the
    way the `store` fixture runs it once per store): the `ollama` fixture is
    then Ollama's own API or a scripted OpenAI-compatible server in a dialect
    (tests/doubles/openai_server.py), with the same scripting; with no arguments, every
    one of MODEL_SERVERS. tests/doubles/wire.py reads what each was sent."""
    marker = metafunc.definition.get_closest_marker("model_servers")
    if marker is not None and "ollama" in metafunc.fixturenames:
        kinds = marker.args or MODEL_SERVERS
        unknown = set(kinds) - set(MODEL_SERVERS)
        assert not unknown, f"model_servers: unknown {sorted(unknown)}, not in {MODEL_SERVERS}"
        metafunc.parametrize("ollama", kinds, indirect=True, ids=[f"on-{k}" for k in kinds])


def pytest_sessionstart(session: pytest.Session) -> None:
    """The package compiled once, before the workers start: the editable
    install leaves it uncompiled, and where PYTHONDONTWRITEBYTECODE is set no
    process writes its bytecode, so each of the hundreds of CLI processes the
    tests start would compile the modules it imports again (0.1 s of CPU
    each). compileall writes it whatever that variable says."""
    if not hasattr(session.config, "workerinput"):  # xdist's controller, or no xdist
        compileall.compile_dir(ROOT / "netbox_chat", quiet=2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `long` (a loop of CLI processes, a terminal driven
    through several turns: tens of seconds each) run first, in their order:
    xdist hands out tests in collection order (one or two at a time,
    pyproject.toml's --maxschedchunk), and one such test started last is
    the suite's tail, with the other workers idle. Every worker sorts the
    same way, as xdist requires."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller: the terminal size its environment gives, if any."""
    node.workerinput["terminal_size"] = {k: os.environ[k] for k in TERMINAL_SIZE if k in os.environ}


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker starts with COLUMNS=80 and LINES=24 in its environment,
    which every CLI process a test starts on a pty would take over the pty's
    own size: the worker gets the controller's instead (usually none)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        for key in TERMINAL_SIZE:
            os.environ.pop(key, None)
        os.environ.update(workerinput["terminal_size"])


@pytest.fixture
def ollama(request: pytest.FixtureRequest) -> Iterator[ScriptedOllama]:
    """The scripted model server: Ollama's API, or a dialect of /v1 (above)."""
    kind = getattr(request, "param", "ollama")
    if kind == "ollama":
        server = ScriptedOllama()
    else:
        server = ScriptedOpenAI("ollama" if kind == OLLAMA_V1 else kind)
    with server:
        yield server


@pytest.fixture
def netbox() -> Iterator[NetBoxDouble]:
    with NetBoxDouble(token=TEST_TOKEN) as server:
        yield server


@pytest.fixture
def sessions_dir(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def chat_env(
    sessions_dir: Path, ollama: ScriptedOllama, netbox: NetBoxDouble, tmp_path: Path
) -> dict[str, str]:
    """The environment a user would have: every setting pointing at loopback."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("NETBOX", "OLLAMA"))
    }
    env.update(
        NETBOX_CHAT_SESSIONS=str(sessions_dir),
        XDG_STATE_HOME=str(tmp_path / "state"),  # input history, cold starts: never the real
        NETBOX_CHAT_CHECK_HISTORY_CACHE="1",  # see the top of this file
        **server_env(ollama),
        NETBOX_CHAT_MODEL="qwen3:8b",
        NETBOX_URL=netbox.url,
        NETBOX_TOKEN=TEST_TOKEN,
        PROMPT_TOOLKIT_NO_CPR="1",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # no config file unless a test writes one
        XDG_DATA_HOME=str(tmp_path / "data"),  # the default sessions folder, were none named
        TERM="xterm",
        COLUMNS="100",
    )
    return env


@pytest.fixture(params=DIALECTS)
def openai_server(request: pytest.FixtureRequest) -> Iterator[ScriptedOpenAI]:
    """A scripted OpenAI-compatible server, once per dialect (llama.cpp, vllm,
    sglang, lmstudio, ollama's /v1), with a 40,960-token window for qwen3:8b."""
    with ScriptedOpenAI(request.param, context_lengths={"qwen3:8b": 40_960}) as server:
        yield server


@pytest.fixture
def openai_env(chat_env: dict[str, str], openai_server: ScriptedOpenAI) -> dict[str, str]:
    """`chat_env` with the model on `openai_server`, given the way a user gives it."""
    return {
        **chat_env,
        "NETBOX_CHAT_PROVIDER": "openai",
        "NETBOX_CHAT_BASE_URL": openai_server.base_url,
    }


@pytest.fixture(params=["folder", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """A session store of either kind, empty: a folder, or the test database
    (skipped without NETBOX_CHAT_TEST_PG; failed under NETBOX_CHAT_REQUIRE_PG=1)."""
    if request.param == "folder":
        return StoreUnderTest("folder", str(tmp_path / "sessions"))
    url = database_url()
    empty_database(url)
    return StoreUnderTest("postgres", url)


@pytest.fixture
def pg(store: StoreUnderTest) -> StoreUnderTest:
    """The store, when it is PostgreSQL: for behaviour only a database has."""
    if store.kind != "postgres":
        pytest.skip("a database-only behaviour")
    return store


@pytest.fixture
def store_env(chat_env: dict[str, str], store: StoreUnderTest) -> dict[str, str]:
    """`chat_env` with the sessions in `store`, given the way a user gives it."""
    env = {key: value for key, value in chat_env.items() if key != "NETBOX_CHAT_SESSIONS"}
    env["NETBOX_CHAT_STORE"] = store.value
    return env


@pytest.fixture(autouse=True)
def signal_handlers_restored() -> Iterator[None]:
    """`ask` ignores SIGINT and SIGTERM once its outcome is recorded, to the end
    of the process (CancelOnSignals.settle); run in-process by Typer's runner,
    it must not leave pytest deaf to Ctrl-C."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
