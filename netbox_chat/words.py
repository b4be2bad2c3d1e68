"""Numbers and counts as every line of netbox-chat writes them: `16,384`,
`1 message`, `3 messages`, never `message(s)`. Cheap to import (no deps)."""

from __future__ import annotations


def count(n: object, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, in the plural unless `n` is 1. A value read from a
    store that is not a number (`?`) is shown as it is, with the plural."""
    number = f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
