"""Asking the questions: each in its own new session (or all in one with
`--conversation`), through the same path `netbox-chat ask` takes (build_runtime,
Conversation.run_turn, turn_result), scored as each answer comes in and
written to the run folder before the next question starts.

The first Ctrl-C or SIGTERM cancels the turn under way, which rolls back as
any cancelled turn does; its question is not recorded, so `--resume RUN`
asks it again. Every finished result stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from netbox_chat.agent.runtime import MODEL_INFO_TIMEOUT, CancelOnSignals, build_runtime
from netbox_chat.config import Settings
from netbox_chat.errors import UserFacingError
from netbox_chat.eval.questions import Question
from netbox_chat.eval.runfolder import Plan, RunFolder
from netbox_chat.eval.scoring import Score, judge_prompt, judge_verdict, score_question
from netbox_chat.store.choose import OpenSession

if TYPE_CHECKING:
    from netbox_chat.agent.runtime import Runtime
    from netbox_chat.agent.turns import TurnEvent

T = TypeVar("T")

Progress = Callable[[str, int, Question, dict[str, Any] | None], None]
"""Called before each question (result None) and after it (its result)."""


@dataclass
class Clock:
    """When a turn started, and when its answer's first text arrived."""

    started: float = field(default_factory=time.monotonic)
    first_text: float | None = None

    def sink(self, event: TurnEvent) -> None:
        from netbox_chat.agent.turns import TextDelta

        if self.first_text is None and isinstance(event, TextDelta) and event.text.strip():
            self.first_text = time.monotonic()


def result_record(
    model: str,
    repeat: int,
    question: Question,
    turn: dict[str, Any],
    clock: Clock,
    seconds: float,
    verdict: Score,
) -> dict[str, Any]:
    """One line of results.jsonl: the turn as `ask --json` reports it, with the
    question, its score and the times."""
    ttft = None if clock.first_text is None else round(clock.first_text - clock.started, 3)
    return {
        "model": model,
        "repeat": repeat,
        "question": question.id,
        "tier": question.tier,
        "kind": question.kind,
        "domain": question.domain,
        "template": question.group,
        **turn,
        "score": verdict.as_json(),
        "first_token_seconds": ttft,
        "seconds": round(seconds, 3),
    }


def for_model(settings: Settings, model: str) -> Settings:
    """The run's settings (its provider, server and key) with another model."""
    return dataclasses.replace(settings, model=model)


def check_models(settings: Settings, models: Sequence[str]) -> None:
    """Ask the run's server about each model before the first question, so a
    model it does not have, or a server that is down, stops the run at once
    with one line (a run of failed turns would report 0 % and exit 0)."""
    from netbox_chat.models import provider_for

    for model in dict.fromkeys(models):
        wanted = for_model(settings, model)
        served = provider_for(wanted).served(wanted, timeout=MODEL_INFO_TIMEOUT)
        if served.problem:
            raise UserFacingError(f"cannot evaluate {model}: {served.problem}")


class Runner:
    """Runs a plan's pending questions into a run folder."""

    def __init__(
        self,
        folder: RunFolder,
        plan: Plan,
        settings: Settings,
        signals: CancelOnSignals,
        progress: Progress | None = None,
        *,
        parallel: int = 1,
    ) -> None:
        self.folder = folder
        self.plan = plan
        self.settings = settings
        self.signals = signals
        self.progress = progress
        self.parallel = max(1, parallel)
        self.store = folder.store()
        self.interrupted = False
        self._judge_model: Any = None

    def settings_for(self, model: str) -> Settings:
        return for_model(self.settings, model)

    async def run(self, pending: list[tuple[str, int, Question]]) -> None:
        """Ask what is pending: each question in a new session, or with
        `--conversation` each (model, repeat) in one; `parallel` of them at once."""
        units: list[Callable[[], Awaitable[bool]]]
        if self.plan.conversation:
            groups: dict[tuple[str, int], list[Question]] = {}
            for model, rep, question in pending:
                groups.setdefault((model, rep), []).append(question)
            units = [
                functools.partial(self._conversation, model, rep, questions)
                for (model, rep), questions in groups.items()
            ]
        else:
            units = [functools.partial(self._fresh, *item) for item in pending]
        if self.parallel == 1:
            for unit in units:
                if not await unit():
                    return
            return
        try:
            await self.signals.run(self._at_once(units))
        except asyncio.CancelledError:
            self.interrupted = True

    async def _at_once(self, units: list[Callable[[], Awaitable[bool]]]) -> None:
        """`parallel` workers taking the next unit as each finishes. The whole
        batch is the one task a signal cancels: the cancel reaches every turn
        under way, each rolls back as a cancelled turn does, and what finished
        is already written."""
        queue = iter(units)

        async def worker() -> None:
            for unit in queue:
                if not await unit():
                    return

        await asyncio.gather(*(worker() for _ in range(self.parallel)))

    async def _guarded(self, work: Coroutine[Any, Any, T]) -> T:
        """Await a turn or a judge's reply so the first signal cancels it: on its
        own task when one runs at a time, as part of the batch when several do."""
        if self.parallel == 1:
            return await self.signals.run(work)
        return await work

    async def _fresh(self, model: str, rep: int, question: Question) -> bool:
        """One question in a new session; False once the run must stop."""
        if self.signals.received is not None:
            self.interrupted = True
            return False
        settings = self.settings_for(model)
        session = self._new_session(settings)
        with session:
            runtime = await self._build(session, settings)
            try:
                result = (
                    None
                    if runtime is None
                    else await self._ask(runtime, session, model, rep, question)
                )
            finally:
                if runtime is not None:
                    await runtime.aclose()
            if result is None:
                with contextlib.suppress(Exception):
                    session.discard_if_unanswered()
                return False
        return True

    async def _build(self, session: OpenSession, settings: Settings) -> Runtime | None:
        """The session's agent; None when a signal came while it was built (with
        several at once the cancel can land here: the build, in a thread, is let
        finish, so the session is never closed under it)."""
        build = asyncio.ensure_future(asyncio.to_thread(build_runtime, session, settings))
        try:
            return await asyncio.shield(build)
        except asyncio.CancelledError:
            self.interrupted = True
            runtime = await build
            await runtime.aclose()
            return None

    async def _conversation(self, model: str, rep: int, questions: list[Question]) -> bool:
        """Every question in one session, in order (contamination is what it measures)."""
        settings = self.settings_for(model)
        session = self._new_session(settings)
        with session:
            runtime = await self._build(session, settings)
            if runtime is None:
                with contextlib.suppress(Exception):
                    session.discard_if_unanswered()
                return False
            try:
                for question in questions:
                    if self.signals.received is not None:
                        self.interrupted = True
                        return False
                    if await self._ask(runtime, session, model, rep, question) is None:
                        return False
            finally:
                await runtime.aclose()
        return True

    def _new_session(self, settings: Settings) -> OpenSession:
        return self.store.create(
            model=settings.model, netbox_url=settings.netbox_url, profile=settings.profile
        )

    async def _ask(
        self, runtime: Runtime, session: OpenSession, model: str, rep: int, question: Question
    ) -> dict[str, Any] | None:
        """Ask, score, record; None when a signal cancelled the turn (rolled back)."""
        from netbox_chat.ui.streamjson import turn_result

        if self.progress is not None:
            self.progress(model, rep, question, None)
        clock = Clock()
        outcome = None
        with contextlib.suppress(asyncio.CancelledError):  # cancelled before it began
            outcome = await self._guarded(
                runtime.conversation.run_turn(
                    question.text, clock.sink, deadline=self.settings.deadline
                )
            )
        seconds = time.monotonic() - clock.started
        if outcome is None or outcome.status == "cancelled":
            self.interrupted = True
            return None
        turn = turn_result(session.id, outcome)
        if outcome.status != "done":
            verdict = Score(False, f"the turn {outcome.status}: {outcome.error or 'no answer'}")
        else:
            verdict = score_question(question, outcome.answer)
            if verdict.correct is None and self.plan.judge and question.reference:
                # with a judge an explanation is scored: a non-answer is wrong, unasked
                verdict = (
                    dataclasses.replace(verdict, correct=False)
                    if verdict.declined
                    else await self._judge(question, outcome.answer)
                )
        result = result_record(model, rep, question, turn, clock, seconds, verdict)
        if outcome.grounding is not None:  # checked at the turn's end, as `ask` shows it
            result["grounding"] = outcome.grounding.as_json()
        self.folder.append(result)
        if self.progress is not None:
            self.progress(model, rep, question, result)
        return result

    async def _judge(self, question: Question, answer: str) -> Score:
        """The judge model's verdict on an explanation (never on the other types).
        The judge is the run's own provider and server with the judge's model;
        a judge that fails or gives no verdict makes the answer wrong, so no
        answer leaves the denominator."""
        from netbox_chat.agent.turns import describe_error, text_of

        assert self.plan.judge is not None
        try:
            model = await self._judge_chat_model(self.plan.judge)
            reply = await self._guarded(
                model.ainvoke(judge_prompt(question.text, question.reference, answer))
            )
        except asyncio.CancelledError:
            self.interrupted = True
            return Score(None, "judge interrupted")
        except Exception as exc:
            return Score(False, f"judge failed: {describe_error(exc)}")
        verdict = judge_verdict(text_of(reply))
        if verdict.correct is None:
            return dataclasses.replace(verdict, correct=False)
        return verdict

    async def _judge_chat_model(self, judge: str) -> Any:
        """The judge's chat model, built once per run through the run's provider."""
        from netbox_chat.models import provider_for

        if self._judge_model is None:
            settings = self.settings_for(judge)
            provider = provider_for(settings)
            served = await asyncio.to_thread(provider.served, settings, timeout=MODEL_INFO_TIMEOUT)
            self._judge_model = provider.chat_model(settings, served, reasoning=False)
        return self._judge_model
