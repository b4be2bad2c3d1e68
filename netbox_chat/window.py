"""The context window's arithmetic, cheap to import (doctor uses it without
LangChain): the session's window, the NetBox result budget that scales with
it, and the least a window must hold for one turn."""

from __future__ import annotations

import math

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
    chars = FIXED_REQUEST_CHARS + result_budget(window)
    return math.ceil(chars / DEFAULT_CHARS_PER_TOKEN) + REPLY_TOKENS


SUMMARY_INSTRUCTIONS_TOKENS = 600
"""The summary request's own instructions, with room to spare."""


def transcript_chars(window: int, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    """How much transcript a summary request may carry and still fit the
    window with its instructions and the summary the model writes."""
    tokens = window - REPLY_TOKENS - SUMMARY_INSTRUCTIONS_TOKENS
    return max(2_000, int(tokens * chars_per_token))
