"""The grounding check as a pipeline: what an answer states, and whether the
records NetBox returned hold it.

    read    (claims/read.py)    an answer -> facts, each with its span
    index   (claims/index.py)   the turn's tool calls -> records and sets
    verify  (claims/verify.py)  facts x index -> verified / ungrounded / unchecked
    present (claims/present.py) marks, the line after the answer, JSON

`check(answer, calls)` runs them all at a turn's end (the REPL, `ask`,
`eval`, /show); `eval`'s scoring reads answers with the same reader, so both
agree on what an answer says. `check` never raises.
"""

from netbox_chat.claims.grounding import Claim, Grounding, check
from netbox_chat.claims.index import Call

__all__ = ["Call", "Claim", "Grounding", "check"]
