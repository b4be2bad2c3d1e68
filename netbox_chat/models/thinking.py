"""A model's thinking: what to ask Ollama for, and how to keep the scratchpad out
of the answer.

Ollama delivers a thinking model's trace in one of two ways. Since 0.9.0 a
request with `think` set gets it in `message.thinking` chunks before the
content (and since 0.12.4 an unset `think` means true for a model with the
`thinking` capability). Older servers, and models Ollama does not know to think,
write it into the content between `<think>` and `</think>`. Either way it is
shown to the user as thinking, kept in the ledger, and never stored or sent as
the answer.

Pure and cheap to import (no LangChain, no httpx): the CLI uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from netbox_chat.config import LEVELS, THINK_SETTINGS

if TYPE_CHECKING:
    from netbox_chat.models.model_info import ModelInfo

OPEN_TAG, CLOSE_TAG = "<think>", "</think>"
REASONING_KEY = "reasoning_content"
"""Where langchain-ollama keeps a reply's thinking (`additional_kwargs`), and
sends it back from as Ollama's `thinking`."""


def check_setting(value: str | None, source: str) -> str | None:
    """The setting, lower-cased, or ValueError with a one-line message naming `source`."""
    if value is None or not value.strip():
        return None
    setting = value.strip().lower()
    if setting not in THINK_SETTINGS:
        raise ValueError(f"{source} must be one of {', '.join(THINK_SETTINGS)}, got {value!r}")
    return setting


def setting_label(setting: str | None) -> str:
    """`thinking on`, `thinking off`, `thinking high`, or the model's default."""
    return "thinking: the model's default" if setting is None else f"thinking {setting}"


def thought_for(seconds: float | None) -> str:
    """`thought for 12s` (tenths under ten seconds), as the REPL and the export say it."""
    value = seconds or 0.0
    return f"thought for {value:.1f}s" if value < 10 else f"thought for {value:.0f}s"


@dataclass(frozen=True)
class ThinkPlan:
    """How a session asks its model to think.

    `reasoning` is ChatOllama's `reasoning`, which it sends as `think`: None sends
    nothing, True/False turn thinking on or off, a string is a level. `note` is
    one line for the user when the plan is not what they asked for.
    """

    reasoning: bool | str | None
    label: str
    note: str | None = None


def plan_thinking(setting: str | None, info: ModelInfo | None) -> ThinkPlan:
    """What to send for `setting` (see THINK_SETTINGS), given what Ollama said of the model.

    Never a `think` Ollama would refuse: true or a level for a model without the
    `thinking` capability is a 400 (server/routes.go, ChatHandler), so such a
    request becomes a note instead. `think: true` is what an unset `think` means
    for a thinking model since 0.12.4, so the model's default is sent as true:
    langchain-ollama keeps `message.thinking` only when `reasoning` is truthy.
    """
    if info is None or info.capabilities is None:
        # Old server, or /api/show failed. `think: false` is harmless anywhere;
        # anything else is left to the model, whose `<think>` tags are split off.
        if setting in (None, "off"):
            return ThinkPlan(False if setting else None, setting_label(setting))
        name = info.name if info is not None else "the model"
        note = f"the model server did not say whether {name} can think; leaving it to the model"
        return ThinkPlan(None, setting_label(None), note)
    if not info.can_think:
        label = f"thinking off ({info.name} cannot think)"
        if setting in (None, "off"):
            return ThinkPlan(None, label)
        return ThinkPlan(None, label, f"{info.name} cannot think; answering without thinking")
    if info.thinks_in_levels:
        if setting == "off":
            note = f"{info.name} cannot stop thinking; it thinks as little as it can (low)"
            return ThinkPlan("low", "thinking low", note)
        if setting in LEVELS:
            return ThinkPlan(setting, f"thinking {setting}")
        return ThinkPlan(True, "thinking on")
    if setting == "off":
        return ThinkPlan(False, "thinking off")
    if setting in LEVELS:
        note = f"{info.name} takes no thinking levels; thinking on"
        return ThinkPlan(True, "thinking on", note)
    return ThinkPlan(True, "thinking on")


def inlines_thinking(reasoning: object) -> bool:
    """Whether a model's `<think>` in the content can be its thinking: only when
    no `think` was sent (ChatOllama's `reasoning` unset or off). With `think`
    sent, Ollama (>= 0.9) delivers the trace in `message.thinking` and the
    content is the answer, so a `<think>` there is text the model wrote (say,
    quoting a NetBox description)."""
    return not reasoning


class ThinkSplitter:
    """Splits streamed content into (thinking, answer).

    Only a leading block is thinking: `<think>` as the first thing in the
    content (after whitespace), up to `</think>`. Anything after the block, or
    content that starts with anything else, is the answer, whatever tags it
    holds: a literal `<think>` in an answer (a quoted description) must never
    hide the rest of it. With `inline=False` (see `inlines_thinking`) nothing
    is thinking.

    A tag cut between two chunks is held back until the next chunk tells what it
    is, so no `<thi` reaches the screen; an unclosed leading `<think>` (the
    model is still thinking) makes everything after it thinking. The whitespace
    a model puts after a tag belongs to neither side.
    """

    def __init__(self, inline: bool = True) -> None:
        self.state = "start" if inline else "answer"  # then "inside", then "answer"
        self.pending = ""
        self.skip_space = True  # leading whitespace of the answer, or after a tag

    def feed(self, text: str) -> tuple[str, str]:
        thinking: list[str] = []
        answer: list[str] = []
        rest = self.pending + text
        self.pending = ""
        if self.state == "start":
            rest = rest.lstrip()
            if rest.startswith(OPEN_TAG):
                self.state, rest = "inside", rest[len(OPEN_TAG) :]
            elif OPEN_TAG.startswith(rest):  # nothing yet, or a tag cut short
                self.pending = rest
                return "", ""
            else:
                self.state = "answer"
        if self.state == "inside":
            found = rest.find(CLOSE_TAG)
            if found < 0:
                held = _partial_tag(rest, CLOSE_TAG)
                self._emit(thinking, rest[: len(rest) - held])
                self.pending = rest[len(rest) - held :]
                return "".join(thinking), ""
            self._emit(thinking, rest[:found])
            rest = rest[found + len(CLOSE_TAG) :]
            self.state, self.skip_space = "answer", True
        self._emit(answer, rest)
        return "".join(thinking), "".join(answer)

    def finish(self) -> tuple[str, str]:
        """What is still held back: a `<` that turned out to be text."""
        rest, self.pending = self.pending, ""
        return (rest, "") if self.state == "inside" else ("", rest)

    def _emit(self, side: list[str], text: str) -> None:
        if self.skip_space:
            text = text.lstrip()
            if not text:
                return
            self.skip_space = False
        side.append(text)


def _partial_tag(text: str, tag: str) -> int:
    """The length of the longest end of `text` that could be the start of `tag`."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0


def split_thinking(text: str, inline: bool = True) -> tuple[str, str]:
    """(thinking, answer) of a whole message's content (see ThinkSplitter)."""
    splitter = ThinkSplitter(inline)
    thinking, answer = splitter.feed(text)
    late_thinking, late_answer = splitter.finish()
    return (thinking + late_thinking).strip(), (answer + late_answer).rstrip()
