"""The context window: a request never overflows in silence.

Ollama gives a request `num_ctx` tokens and, when it is longer, answers 200
anyway after dropping the oldest messages (server/prompt.go, `chatPrompt`) or
cutting a middle block (the runner). The only trace the client gets is the
final line's `prompt_eval_count`. So this module, inside the agent's graph:

- estimates every request before it goes out, in tokens, from a ratio of
  characters to tokens learned from Ollama's own counts in this session;
- compacts first when the estimate passes the threshold (`compact_at` of the
  window): the older part of what the model sees is summarized by the model
  and the last steps are kept, as deepagents' own summarization does, through
  the same `_summarization_event` state (so `/compact`, `/rewind` and resume
  read it the same way). It runs before every model call of a turn, so a turn
  with several big tool results compacts between its calls too;
- reads `prompt_eval_count` after every call, for the meter and the ledger,
  and flags a request Ollama visibly cut;
- when a server refuses a request as too long instead (an OpenAI-compatible
  server's 400, netbox_chat.models.openai.WindowOverflow), compacts and sends
  it once more, else fails the turn in one line naming the window.

Everything it changes is state of the running turn: with `durability="exit"`
it reaches the file only when the turn ends, so Ctrl-C or a crash during a
compaction rolls back with the turn.
"""

from __future__ import annotations

import json
import math
import statistics
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, cast

from deepagents.middleware.summarization import SUMMARIZATION_EVENT_KEY, SummarizationState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from langgraph.types import Command

from netbox_chat.agent.history import (
    QUESTION_KEY,
    SUMMARY_PREFIX,
    SUMMARY_SOURCE,
    effective_messages,
    event_front,
    is_summary,
    summary_request,
)
from netbox_chat.agent.turns import (
    ContextCompacted,
    ContextMeasured,
    ContextSummaryFailed,
    describe_error,
    text_of,
)
from netbox_chat.errors import UserFacingError
from netbox_chat.models.thinking import REASONING_KEY, inlines_thinking, split_thinking
from netbox_chat.models.window import DEFAULT_CHARS_PER_TOKEN, transcript_chars
from netbox_chat.words import number

SAFETY = 0.9
"""The ratio used is 90 % of the lowest one seen lately: err on the safe side."""

CALIBRATION_SAMPLES = 8

KEEP_FRACTION = 0.3
"""At most this share of the window is kept verbatim after a compaction (the
last steps); the rest of what the model saw goes into the summary."""

TRUNCATION_SHORTFALL = 0.85
"""A count below this share of the expected one means Ollama left part of the
request out; once calibrated, expectations stay within a few per cent."""

MOST_CHARS_PER_TOKEN = 5.0
"""Before any calibration, the expected count is the lowest plausible one:
English prose runs up to about 5 characters a token, JSON well under."""


CALIBRATION_KEY = "_context_calibration"
"""State key holding the latest characters-per-token samples. In the state,
they persist with the turn that measured them (and roll back with it), so a
resumed session starts calibrated."""


class ContextState(SummarizationState):
    _context_calibration: Annotated[NotRequired[list[float] | None], PrivateStateAttr]


@dataclass
class Calibration:
    """Characters per token, learned from Ollama's counts of this session's requests."""

    samples: deque[float] = field(default_factory=lambda: deque(maxlen=CALIBRATION_SAMPLES))

    @classmethod
    def from_state(cls, stored: Any) -> Calibration:
        samples = [float(x) for x in stored] if isinstance(stored, list) else []
        return cls(deque(samples, maxlen=CALIBRATION_SAMPLES))

    def observe(self, chars: int, tokens: int) -> None:
        if tokens > 0 and chars > 0:
            self.samples.append(chars / tokens)

    @property
    def safe_ratio(self) -> float:
        return min(self.samples) * SAFETY if self.samples else DEFAULT_CHARS_PER_TOKEN

    def estimate(self, chars: int) -> int:
        """Tokens, erring high."""
        return math.ceil(chars / self.safe_ratio)

    def expected(self, chars: int) -> int:
        """Tokens, as Ollama will most likely count them."""
        ratio = statistics.median(self.samples) if self.samples else MOST_CHARS_PER_TOKEN
        return math.ceil(chars / ratio)


def message_chars(message: BaseMessage) -> int:
    """What one message adds to a request: its text, its tool calls, and the
    template's few characters around it."""
    chars = len(text_of(message)) + 16
    if isinstance(message, AIMessage):
        chars += sum(
            len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False)) + 40
            for call in message.tool_calls
        )
    return chars


def messages_chars(messages: Sequence[BaseMessage]) -> list[int]:
    """Each message's share of a request, the running turn's thinking included:
    ThinkingMiddleware keeps the thinking of the replies after the last
    question, langchain-ollama sends it as `thinking`, and Ollama's qwen3 and
    gpt-oss templates render it for those messages (`<think>...</think>`).
    Left out, a turn that thought at length between tool calls passed the
    window unseen: no compaction, and Ollama dropped the oldest messages."""
    thinking = sent_thinking_chars(messages)
    return [message_chars(m) + t for m, t in zip(messages, thinking, strict=True)]


def sent_thinking_chars(messages: Sequence[BaseMessage]) -> list[int]:
    """The thinking each message carries into the request (with the
    template's tags): only the replies after the last question keep theirs."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    sizes = []
    for i, message in enumerate(messages):
        kept = i > last and isinstance(message, AIMessage)
        thinking = message.additional_kwargs.get(REASONING_KEY) if kept else None
        sizes.append(len(str(thinking)) + 20 if thinking else 0)
    return sizes


def tools_chars(tools: Sequence[Any]) -> int:
    """The tool definitions, as JSON, the way the template carries them."""
    total = 0
    for tool in tools:
        try:
            total += len(json.dumps(convert_to_openai_tool(tool)))
        except Exception:  # a tool we cannot describe is still sent: count its name
            total += len(str(getattr(tool, "name", tool))) + 200
    return total


def _safe_starts(messages: Sequence[BaseMessage]) -> list[int]:
    """Where a kept tail may begin without separating a tool result from its call."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, AIMessage) or (isinstance(m, HumanMessage) and not is_summary(m))
    ]


def choose_cut(messages: Sequence[BaseMessage], calibration: Calibration, keep_tokens: int) -> int:
    """Index of the first message to keep: the longest tail that fits in
    `keep_tokens`, but at least the last step. 0 means nothing can be summarized."""
    starts = [i for i in _safe_starts(messages) if i > 0]
    if not starts:
        return 0
    sizes = messages_chars(messages)
    cut = starts[-1]
    for start in reversed(starts[:-1]):
        tail = sum(sizes[start:])
        if calibration.estimate(tail) > keep_tokens:
            break
        cut = start
    return cut


def _state_cutoff(event: Any, cut: int) -> int:
    """`cut` (an index into what the model sees) as an index into the state's
    full message list, which a previous summary event has shortened by its
    cutoff (minus the messages it puts in front: the summary, and the open
    question if it kept one)."""
    front = event_front(event)
    if front is None:
        return cut
    return int(event["cutoff_index"]) + cut - len(front)


def _open_question(older: Sequence[BaseMessage]) -> HumanMessage | None:
    """The question being answered, when the cut falls inside the current turn."""
    for message in reversed(older):
        if isinstance(message, HumanMessage) and not is_summary(message):
            return message
        if isinstance(message, AIMessage) and not message.tool_calls:
            return None  # the last question before the cut was answered
    return None


class ContextGuard(AgentMiddleware[Any, Any, Any]):
    """Measures, compacts and checks every model request of a session.

    It takes deepagents' `SummarizationMiddleware` slot (same name, same state
    key), whose trigger would be 170,000 tokens for a model without a profile.
    """

    state_schema = ContextState

    def __init__(self, window: int, compact_at: float) -> None:
        super().__init__()
        self.window = window
        self.compact_at = compact_at
        self.calibration = Calibration()
        self.last_prompt_tokens: int | None = None
        self._tools_chars: dict[tuple[str, ...], int] = {}

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"

    @property
    def threshold(self) -> int | None:
        return int(self.window * self.compact_at) if self.compact_at > 0 else None

    def request_chars(self, request: ModelRequest) -> int:
        key = tuple(str(getattr(t, "name", t)) for t in request.tools)
        if key not in self._tools_chars:
            self._tools_chars[key] = tools_chars(request.tools)
        fixed = self._tools_chars[key]
        if request.system_message is not None:
            fixed += message_chars(request.system_message)
        return fixed + sum(messages_chars(request.messages))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | ExtendedModelResponse[Any]:
        emit = get_stream_writer()
        self.calibration = Calibration.from_state(request.state.get(CALIBRATION_KEY))
        event = request.state.get(SUMMARIZATION_EVENT_KEY)
        seen = effective_messages(list(request.messages), event)
        request = request.override(messages=cast("list[AnyMessage]", seen))
        estimate = self.calibration.estimate(self.request_chars(request))
        update: dict[str, Any] = {}
        threshold = self.threshold
        if threshold is not None and estimate > threshold:
            compacted = await self._compact(request, event, estimate, emit)
            if compacted is not None:
                request, update[SUMMARIZATION_EVENT_KEY] = compacted
        try:
            response, chars, thinking = await self._send(request, handler)
        except ContextOverflowError:
            # The server refused the request as too long (an OpenAI-compatible
            # server says so; Ollama cuts in silence, see above): compact and
            # retry once, else the turn fails, rolled back, in one line.
            compacted = await self._compact(request, event, self.window, emit)
            if compacted is None:
                raise self._overflowed() from None
            request, update[SUMMARIZATION_EVENT_KEY] = compacted
            try:
                response, chars, thinking = await self._send(request, handler)
            except ContextOverflowError:
                raise self._overflowed() from None
        if self._measure(response, chars, thinking, emit):
            update[CALIBRATION_KEY] = list(self.calibration.samples)
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    async def _send(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> tuple[ModelResponse, int, int]:
        """The response to `request`, with its characters and the running turn's
        thinking among them: measured on the request as sent (compacted or
        not, first try or retry), since `_measure` checks Ollama's count of
        that very request against them."""
        chars = self.request_chars(request)
        thinking = sum(sent_thinking_chars(request.messages))
        return await handler(request), chars, thinking

    def _overflowed(self) -> UserFacingError:
        return UserFacingError(
            f"the request does not fit the model's window of {number(self.window)} tokens, even "
            "compacted: start a new session, or give the model a larger window"
        )

    async def _compact(
        self, request: ModelRequest, event: Any, estimate: int, emit: Callable[[Any], None]
    ) -> tuple[ModelRequest, dict[str, Any]] | None:
        """Summarize the older part of `request`; None (and a warning) when that
        is not possible, so the call goes on as it was."""
        messages = list(request.messages)
        keep_tokens = int(self.window * KEEP_FRACTION)
        cut = choose_cut(messages, self.calibration, keep_tokens)
        older, tail = messages[:cut], messages[cut:]
        if not [m for m in older if not is_summary(m)]:
            emit(ContextSummaryFailed(estimate, self.window, "nothing older to summarize"))
            return None
        budget = transcript_chars(self.window, self.calibration.safe_ratio)
        try:
            reply = await request.model.ainvoke(
                summary_request(older, budget), config={"tags": [TAG_NOSTREAM]}
            )
            inline = inlines_thinking(getattr(request.model, "reasoning", None))
            text = split_thinking(text_of(reply), inline)[1].strip()
            if not text:
                raise ValueError("the model's summary was empty")
        except Exception as exc:  # the conversation stays whole; the user hears why
            reason = str(exc) if isinstance(exc, ValueError) else describe_error(exc)
            emit(ContextSummaryFailed(estimate, self.window, reason))
            return None
        summary = HumanMessage(
            content=SUMMARY_PREFIX + text,
            additional_kwargs=dict(SUMMARY_SOURCE),
            id=str(uuid.uuid4()),
        )
        # The question being asked is never summarized: when the cut falls
        # inside the running turn, it follows the summary as it was typed.
        question = _open_question(older)
        front: list[BaseMessage] = [summary] if question is None else [summary, question]
        compacted = request.override(messages=cast("list[AnyMessage]", [*front, *tail]))
        after = self.calibration.estimate(self.request_chars(compacted))
        usage: dict[str, Any] = dict(getattr(reply, "usage_metadata", None) or {})
        emit(
            ContextCompacted(
                summarized=len(older),
                tokens_before=estimate,
                tokens_after=after,
                window=self.window,
                summary_tokens_in=int(usage.get("input_tokens", 0)),
                summary_tokens_out=int(usage.get("output_tokens", 0)),
            )
        )
        new_event = {
            "cutoff_index": _state_cutoff(event, cut),
            "summary_message": summary,
            QUESTION_KEY: question,
            "file_path": None,
            "created_at_index": len(messages),
        }
        return compacted, new_event

    def _measure(
        self, response: ModelResponse, chars: int, thinking: int, emit: Callable[[Any], None]
    ) -> bool:
        """Ollama's count of what it evaluated, for the meter, the ledger and the
        calibration; a count at the window, or well short of what was sent,
        means Ollama cut the request. True when the calibration learned from it.

        Of the request's `chars`, `thinking` is the running turn's thinking:
        prose, counted at the most characters a token carries, so a long
        thought does not make an uncut request look short."""
        usage = next(
            (
                m.usage_metadata
                for m in response.result
                if isinstance(m, AIMessage) and m.usage_metadata
            ),
            None,
        )
        if not usage:
            return False
        tokens = int(usage.get("input_tokens", 0))
        expected = self.calibration.expected(chars - thinking) + math.ceil(
            thinking / MOST_CHARS_PER_TOKEN
        )
        truncated = tokens >= self.window or tokens < expected * TRUNCATION_SHORTFALL
        if not truncated:
            self.calibration.observe(chars, tokens)
        self.last_prompt_tokens = tokens
        emit(ContextMeasured(tokens, self.window, truncated))
        return not truncated

    def tokens_without(self, tokens: int, chars_removed: int) -> int:
        """A request of `tokens` once `chars_removed` characters are gone from
        it (what `/compact` reports as the meter after)."""
        return max(0, tokens - int(chars_removed / self.calibration.safe_ratio))
