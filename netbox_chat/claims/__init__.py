"""The one claims reader: what an answer states (names, numbers, addresses,
values; non-answers, negation, shapes) and whether NetBox's replies hold it.

`check(answer, evidence)` is the grounding check the REPL, `ask` and `eval`
run at a turn's end; `eval`'s scoring reads answers with the same reader
(netbox_chat.claims.reader), so both agree on what an answer says.
"""

from netbox_chat.claims.grounding import Claim, Grounding, check

__all__ = ["Claim", "Grounding", "check"]
