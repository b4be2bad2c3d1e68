"""Numbers and counts as every line of netbox-chat writes them: `16,384`,
`1 message`, `3 messages`, never `message(s)`. Cheap to import (no deps)."""

from __future__ import annotations


def number(n: object) -> str:
    """A count as every line shows one: grouped by thousands (`16,384`, never
    `16384`). A value read from a store that is not a number (`?`) is shown
    as it is. `ask --json` and `--stream-json` keep raw integers."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else str(n)


def count(n: object, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, in the plural unless `n` is 1."""
    return f"{number(n)} {noun if n == 1 else plural or noun + 's'}"
