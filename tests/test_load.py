"""Load held (issue 41): many `ask` processes at once through the real CLI,
on the folder store and on PostgreSQL, against a scripted model that takes
0.5 s per reply. Every turn is kept and its ledger complete; on one session,
one answers and the others exit 4 at once. The figures (overhead per turn at
1, 8 and 32 at once) are bench/bench_load.py's; here only what a user would
notice: nothing lost, no error, no wait on a busy session."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from netbox_chat.errors import ExitStatus
from tests.doubles.ollama_server import Reply, ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest, empty_database, scratch_database
from tests.drive.load import Asked, answer_to, ask_at_once, slow_model
from tests.drive.process import first_turn

AT_ONCE = 32
ON_ONE_SESSION = 8


@pytest.fixture
def own_store(store: StoreUnderTest) -> Iterator[StoreUnderTest]:
    """The store, on a database of its own when it is PostgreSQL: these
    tests run for minutes on a busy machine, and the shared test database
    is emptied by every other store test that starts meanwhile."""
    if store.kind == "folder":
        yield store
        return
    with scratch_database() as url:
        empty_database(url)
        yield StoreUnderTest("postgres", url)


@pytest.fixture
def own_env(chat_env: dict[str, str], own_store: StoreUnderTest) -> dict[str, str]:
    """`chat_env` with the sessions in `own_store`."""
    env = {key: value for key, value in chat_env.items() if key != "NETBOX_CHAT_SESSIONS"}
    return {**env, "NETBOX_CHAT_STORE": own_store.value}


@pytest.mark.timeout(400)
@pytest.mark.long
def test_32_asks_at_once_each_in_its_own_session_keep_every_turn(
    own_store: StoreUnderTest, own_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Cron starting many `ask` runs on one folder, or a team asking at once
    on its database: each process gets its own answer, in its own session,
    kept whole."""
    ollama.responder = slow_model
    questions = [f"which devices are at site {n}?" for n in range(AT_ONCE)]
    asked = ask_at_once(own_env, questions, "--json")
    assert [f"{a.question}: exit {a.code}: {a.stderr}{a.stdout}" for a in asked if a.code] == []
    results = [json.loads(a.stdout) for a in asked]
    assert [r["answer"] for r in results] == [answer_to(q) for q in questions]
    assert [
        r for r in results if (r["status"], r["error"], r["kept"]) != ("done", None, True)
    ] == []
    sessions = [str(r["session"]) for r in results]
    assert (
        sorted(own_store.session_ids()) == sorted(set(sessions)) and len(set(sessions)) == AT_ONCE
    )
    for session in sessions:
        assert own_store.statuses(session) == [(1, "done")]
        own_store.assert_ledger_agrees(session)


@pytest.mark.timeout(300)
def test_8_asks_at_once_on_one_session_one_answers_and_the_others_exit_4_at_once(
    own_store: StoreUnderTest, own_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """The model answers only once the other seven have ended: they could
    not have waited for the session, nor lost or doubled a turn."""
    session = first_turn(own_env, ollama)
    others_ended = threading.Event()

    def held_model(body: dict[str, object]) -> Reply:
        others_ended.wait(240)
        return [Text("Only one answer.")]

    def on_exit(done: list[Asked]) -> None:
        if sum(a.code == ExitStatus.SESSION_BUSY for a in done) == ON_ONE_SESSION - 1:
            others_ended.set()

    ollama.responder = held_model
    try:
        asked = ask_at_once(
            own_env, ["and now?"] * ON_ONE_SESSION, "--session", session, on_exit=on_exit
        )
    finally:
        others_ended.set()
    (answered,) = [a for a in asked if a.code == 0]
    busy = [a for a in asked if a.code == ExitStatus.SESSION_BUSY]
    assert len(busy) == ON_ONE_SESSION - 1, [(a.code, a.stderr) for a in asked]
    assert answered.stdout.strip() == "Only one answer."
    for refused in busy:
        (line,) = refused.stderr.splitlines()
        assert line.startswith(f"netbox-chat: session {session} is open in another netbox-chat")
        assert refused.seconds < answered.seconds
    assert own_store.statuses(session) == [(1, "done"), (2, "done")]
    own_store.assert_ledger_agrees(session)
