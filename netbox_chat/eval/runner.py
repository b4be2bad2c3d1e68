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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netbox_chat.config import Settings
from netbox_chat.eval.questions import Question
from netbox_chat.eval.runfolder import Plan, RunFolder
from netbox_chat.eval.scoring import Score, judge_prompt, judge_verdict, score
from netbox_chat.runtime import CancelOnSignals, build_runtime
from netbox_chat.stores import OpenSession

if TYPE_CHECKING:
    from netbox_chat.runtime import Runtime
    from netbox_chat.turns import TurnEvent

Progress = Callable[[str, int, Question, dict[str, Any] | None], None]
"""Called before each question (result None) and after it (its result)."""


@dataclass
class Clock:
    """When a turn started, and when its answer's first text arrived."""

    started: float = field(default_factory=time.monotonic)
    first_text: float | None = None

    def sink(self, event: TurnEvent) -> None:
        from netbox_chat.turns import TextDelta

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
        **turn,
        "score": verdict.as_json(),
        "first_token_seconds": ttft,
        "seconds": round(seconds, 3),
    }


class Runner:
    """Runs a plan's pending questions into a run folder."""

    def __init__(
        self,
        folder: RunFolder,
        plan: Plan,
        settings: Settings,
        signals: CancelOnSignals,
        progress: Progress | None = None,
    ) -> None:
        self.folder = folder
        self.plan = plan
        self.settings = settings
        self.signals = signals
        self.progress = progress
        self.store = folder.store()
        self.interrupted = False

    def settings_for(self, model: str) -> Settings:
        return dataclasses.replace(self.settings, model=model)

    async def run(self, pending: list[tuple[str, int, Question]]) -> None:
        if self.plan.conversation:
            groups: dict[tuple[str, int], list[Question]] = {}
            for model, rep, question in pending:
                groups.setdefault((model, rep), []).append(question)
            for (model, rep), questions in groups.items():
                if not await self._conversation(model, rep, questions):
                    return
            return
        for model, rep, question in pending:
            if not await self._fresh(model, rep, question):
                return

    async def _fresh(self, model: str, rep: int, question: Question) -> bool:
        """One question in a new session; False once the run must stop."""
        if self.signals.received is not None:
            self.interrupted = True
            return False
        settings = self.settings_for(model)
        session = self._new_session(settings)
        with session:
            runtime = await asyncio.to_thread(build_runtime, session, settings)
            try:
                result = await self._ask(runtime, session, model, rep, question)
            finally:
                await runtime.aclose()
            if result is None:
                with contextlib.suppress(Exception):
                    session.discard_if_unanswered()
                return False
        return True

    async def _conversation(self, model: str, rep: int, questions: list[Question]) -> bool:
        """Every question in one session, in order (contamination is what it measures)."""
        settings = self.settings_for(model)
        session = self._new_session(settings)
        with session:
            runtime = await asyncio.to_thread(build_runtime, session, settings)
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
        from netbox_chat.streamjson import turn_result

        if self.progress is not None:
            self.progress(model, rep, question, None)
        clock = Clock()
        outcome = None
        with contextlib.suppress(asyncio.CancelledError):  # cancelled before it began
            outcome = await self.signals.run(
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
            verdict = score(
                question.kind, outcome.answer, question.expected, question.universe, question.text
            )
            if verdict.correct is None and self.plan.judge and question.reference:
                verdict = await self._judge(question, outcome.answer)
        result = result_record(model, rep, question, turn, clock, seconds, verdict)
        self.folder.append(result)
        if self.progress is not None:
            self.progress(model, rep, question, result)
        return result

    async def _judge(self, question: Question, answer: str) -> Score:
        """The judge model's verdict on an explanation (never on the other types)."""
        from netbox_chat.agent import build_model
        from netbox_chat.turns import describe_error, text_of

        assert self.plan.judge is not None
        model = build_model(self.settings_for(self.plan.judge), reasoning=False)
        try:
            reply = await self.signals.run(
                model.ainvoke(judge_prompt(question.text, question.reference, answer))
            )
        except asyncio.CancelledError:
            self.interrupted = True
            return Score(None, "judge interrupted")
        except Exception as exc:  # a judge that fails leaves the answer unscored
            return Score(None, f"judge failed: {describe_error(exc)}")
        return judge_verdict(text_of(reply))
