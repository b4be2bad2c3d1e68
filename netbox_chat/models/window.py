"""The context window's arithmetic, cheap to import (doctor uses it without
LangChain): the session's window, the NetBox result budget that scales with
it, and the least a window must hold for one turn."""

from __future__ import annotations

import math

from netbox_chat.words import number

DEFAULT_CHARS_PER_TOKEN = 2.5
"""The ratio before Ollama has counted anything: below NetBox JSON's (about 2.7
to 3 characters a token), so a first estimate errs high, never low."""

FIXED_REQUEST_CHARS = 5_600
"""What every request carries before the conversation: the system prompt and
the tool definitions, as sent (5,135 characters measured with the four NetBox
tools and read_file, bench 5; tests/test_context.py keeps this above the real figure)."""

REPLY_TOKENS = 1_024
"""Room a request must leave for the question and the answer, or the summary."""


def session_window(num_ctx: int, context_length: int | None) -> int:
    """The session's window: the setting, capped by what the model was trained
    for (Ollama caps it the same way, with only a log line). It never changes
    while the session is open: a new num_ctx makes Ollama reload the model."""
    return min(num_ctx, context_length) if context_length else num_ctx


MIN_RESULT_BUDGET = 2_000
MAX_RESULT_BUDGET = 60_000


def result_budget(window: int) -> int:
    """Characters one NetBox tool result may take in a window of `window`
    tokens: a sixth of it at JSON's 3 characters a token (half the token
    count), kept between 2,000 (one readable page) and 60,000 (more is not read
    better). The default 16,384-token window gets 8,192, about the 8,000 the
    tools had before the window was known."""
    return max(MIN_RESULT_BUDGET, min(MAX_RESULT_BUDGET, window // 2))


def turn_floor(window: int) -> int:
    """Tokens one turn needs at least: system prompt, tool definitions, one
    tool result at its budget, and room for the question and the answer."""
    return tokens_at_most(FIXED_REQUEST_CHARS + result_budget(window)) + REPLY_TOKENS


def tokens_at_most(chars: int) -> int:
    """Tokens `chars` characters take at most, before any calibration."""
    return math.ceil(chars / DEFAULT_CHARS_PER_TOKEN)


def too_small_for(window: int, question: str) -> str | None:
    """Why a window of `window` tokens cannot hold one turn of `question`
    (system prompt and tools, the question, one NetBox result, the answer),
    with the numbers; None when it can. Asking anyway would have Ollama drop
    the oldest part of the request, the question first."""
    parts = {
        "the system prompt and tools": tokens_at_most(FIXED_REQUEST_CHARS),
        "the question": tokens_at_most(len(question)),
        "one NetBox result": tokens_at_most(result_budget(window)),
        "the answer": REPLY_TOKENS,
    }
    needed = sum(parts.values())
    if needed <= window:
        return None
    each = ", ".join(f"{name} {number(tokens)}" for name, tokens in parts.items())
    return (
        f"the context window ({number(window)} tokens) cannot hold one turn: {each}, "
        f"{number(needed)} in all; raise NETBOX_CHAT_NUM_CTX to "
        f"{number(1 << (needed - 1).bit_length())} "
        "(`netbox-chat doctor` checks it)"
    )


SUMMARY_INSTRUCTIONS_TOKENS = 600
"""The summary request's own instructions, with room to spare."""


def transcript_chars(window: int, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    """How much transcript a summary request may carry and still fit the
    window with its instructions and the summary the model writes."""
    tokens = window - REPLY_TOKENS - SUMMARY_INSTRUCTIONS_TOKENS
    return max(2_000, int(tokens * chars_per_token))
