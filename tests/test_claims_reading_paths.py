"""The reader's shortcut through an ASCII answer reads what the long way
reads. In an ASCII answer it searches the lower case case-sensitively and
tries a pattern only where the words it opens with start (issue 38 item 5:
the check's time per 50 kB); an answer beyond ASCII, whose lower case can
differ in length, is searched as written. A property test over generated
answers: each is read as generated (the shortcut) and with a line after it
holding one character beyond ASCII that states nothing (the long way), and
both readings must state the same facts, numbers, names and negations."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netbox_chat.claims.read import read
from netbox_chat.claims.reader import (
    _CLAUSE_BREAK,
    _CLAUSE_REACH,
    clause_start,
    introduced,
    none_spans,
    numbers,
)

BEYOND_ASCII = "\n\u2020"  # a dagger on a line of its own: no word, no number, no mark

# The words the shortcuts look for, in any case and in other words ("often"
# holds "ten", "xvlan" a noun), and what stands around them.
PIECES = [
    "is", "Is", "are", "was", "were", "has", "have", "not", "isn't", "no", "No,", "NO", "none",
    "None", "all", "All", "every", "each", "there are no", "not found", "zero", "0 results",
    "enabled", "disabled", "connected", "in a rack", "'s", "named", "called", " on ", "by",
    "created by", "interface", "Interface", "port", "7 U", "8 vCPUs", "48 volts", "three",
    "Twenty-one", "ninety nine", "often", "tenant", "Tenant", "tenants", "site", "SITE",
    "device", "VLAN", "vlans", "ip address", "IP  Address", "virtual machine", "Initech",
    "dmi01-akron-sw03", "sw02", "DM-Akron", "active", "offline", "planned", "devices", "racks",
    "of them", "total", "Total:", "in total", "first", "showing", "latest", "most recent",
    "of", "5", "14", "1,234", "2024", "99 %", "xvlan", "snow", "Gi1/0/24", "10.0.0.1/24",
    " ", " ", " ", "", "\n", ". ", ", ", ": ", "; ", " - ", "- ", "1. ", "| ", "|---|", "(", ")",
    # whole statements, which a few pieces seldom make
    "No device is offline", "no active devices", "all racks are active", "Every VLAN is planned",
    "none are offline", "each site is not active", "tenant Initech", "site DM-Akron has 4 racks",
    "Three devices", "sw02 is offline", "sw02 has no cable", "sw02's serial is X1",
    "DM-Akron has the ID 16", "sw02 is interface 14", "A C9300 is 7 U tall", "made by admin",
]  # fmt: skip
answers = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=answers, question=st.sampled_from(["", "Is sw02 active?", "Which VLANs?"]))
def test_an_ascii_answer_reads_the_same_the_short_way_and_the_long_way(
    answer: str, question: str
) -> None:
    longer = answer + BEYOND_ASCII
    assert read(answer, question) == read(longer, question)
    assert numbers(answer) == numbers(longer)
    assert introduced(answer) == introduced(longer)
    assert none_spans(answer) == none_spans(longer)


@settings(max_examples=600, deadline=None)
@given(answer=answers, data=st.data())
def test_a_clause_starts_after_its_last_break_however_it_is_found(
    answer: str, data: st.DataObject
) -> None:
    """clause_start looks for the last one-character break from the end; a
    scan of every break from as far back as it looks must agree."""
    at = data.draw(st.integers(0, len(answer)))
    floor = data.draw(st.integers(0, at))
    scanned = max(floor, at - _CLAUSE_REACH)
    for m in _CLAUSE_BREAK.finditer(answer, scanned, at):
        scanned = m.end()
    assert clause_start(answer, at, floor) == scanned
