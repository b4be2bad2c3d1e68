"""The grounding check measured on crafted answers (issue 38, item 6): wrong answers
whose every name and number is in NetBox's replies are marked, right answers in every
shape are not, inventions always are. The corpus and the measure are in
tests/doubles/claims_corpus.py; `python -m tests.doubles.claims_corpus --table`
prints the figures docs/grounding.md shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.doubles.claims_corpus import (
    CALLS,
    CASES,
    INVENTED,
    LIVE_CALLS,
    LIVE_CASES,
    RIGHT,
    WRONG,
    Case,
    Share,
    double_replies,
    live_replies,
    loose_tokens,
    measure,
    table,
)
from tests.doubles.live_netbox import need_a_real_netbox


@pytest.fixture(scope="module")
def replies() -> dict[str, Any]:
    return double_replies()


@pytest.fixture(scope="module")
def live() -> dict[str, Any]:
    need_a_real_netbox()
    return live_replies()


def _held(corpus: list[Case], replies: dict[str, Any], calls: dict[str, Any]) -> None:
    """The corpus is what it says: every reply is NetBox's data (no refusal), every
    wrong answer only uses names and numbers the replies hold, every invention uses
    one they do not (or makes no call at all)."""
    for key in {key for case in corpus for key in case.calls}:
        assert key in calls, key
        assert not isinstance(replies[key], str), (key, replies[key])  # "Error: ..."
    for case in corpus:
        held = [replies[key] for key in case.calls]
        if case.kind in WRONG:
            assert loose_tokens(case.answer, held) == [], case
        elif case.kind == "invented":
            assert case.calls and loose_tokens(case.answer, held, words=True), case
        elif case.kind == "no_call":
            assert not case.calls, case


def _done_when(figures: dict[str, Share]) -> None:
    """The issue's "Done when": wrong answers >= 95 % marked ungrounded or unchecked and
    >= 80 % ungrounded; right answers <= 2 % with an ungrounded claim and <= 10 % with an
    unchecked one; inventions 100 %; the check never raises."""
    wrong, right, invented = figures["wrong"], figures[RIGHT], figures["inventions"]
    shown = "\n" + table(figures)
    assert wrong.marked >= 0.95 * wrong.n, shown
    assert wrong.ungrounded >= 0.80 * wrong.n, shown
    assert right.ungrounded <= 0.02 * right.n, shown
    assert right.unchecked <= 0.10 * right.n, shown
    assert invented.ungrounded == invented.n, shown
    assert sum(s.errors for key, s in figures.items() if key in (RIGHT, *WRONG, *INVENTED)) == 0


@pytest.mark.parametrize(
    ("corpus", "least", "right", "wrong", "each"),
    [(CASES, 150, 60, 90, 10), (LIVE_CASES, 30, 15, 25, 4)],
    ids=["double", "live"],
)
def test_the_corpus_has_every_kind_in_the_numbers_the_issue_asks(
    corpus: list[Case], least: int, right: int, wrong: int, each: int
) -> None:
    kinds = Counter(case.kind for case in corpus)
    assert len(corpus) >= least
    assert kinds[RIGHT] >= right
    assert sum(kinds[k] for k in WRONG) >= wrong
    assert all(kinds[k] >= each for k in WRONG), kinds
    assert all(kinds[k] >= 2 for k in INVENTED), kinds
    assert len(set(corpus)) == len(corpus)  # no case twice


def test_wrong_answers_use_only_what_the_replies_hold(replies: dict[str, Any]) -> None:
    _held(CASES, replies, CALLS)


def test_the_table_shows_every_kind(replies: dict[str, Any]) -> None:
    figures = measure(CASES, replies, CALLS)
    shown = table(figures)
    assert all(label in shown for label in [*WRONG.values(), *INVENTED.values()]), shown
    counted = {k: s.n for k, s in figures.items()}
    assert counted["wrong"] == sum(counted[k] for k in WRONG)
    assert counted[RIGHT] + counted["wrong"] + counted["inventions"] == len(CASES)


def _verdict(ungrounded: bool = False, unchecked: bool = False) -> SimpleNamespace:
    return SimpleNamespace(ungrounded=["x"] * ungrounded, unchecked=["x"] * unchecked,
                           without_netbox=False)  # fmt: skip


def test_the_thresholds_pass_a_check_that_knows_and_fail_one_that_guesses(
    replies: dict[str, Any],
) -> None:
    """The measure itself: a check that marks exactly the wrong answers and inventions
    meets the thresholds; one that marks everything, nothing, everything unchecked, or
    raises, does not."""
    kinds = {(c.question, c.answer, bool(c.calls)): c.kind for c in CASES}

    def knows(answer: str, calls: list[Any], *, given: str) -> SimpleNamespace:
        return _verdict(ungrounded=kinds[(given, answer, bool(calls))] != RIGHT)

    def raises(answer: str, calls: list[Any], *, given: str) -> SimpleNamespace:
        raise ValueError("substring not found")

    _done_when(measure(CASES, replies, CALLS, knows))
    for guess in (
        lambda *_, **__: _verdict(ungrounded=True),
        lambda *_, **__: _verdict(),
        lambda *_, **__: _verdict(unchecked=True),
        raises,
    ):
        with pytest.raises(AssertionError):
            _done_when(measure(CASES, replies, CALLS, guess))


def test_the_docs_show_the_shares_measured_on_the_double(replies: dict[str, Any]) -> None:
    page = (Path(__file__).parent.parent / "docs" / "grounding.md").read_text()
    shown = table(measure(CASES, replies, CALLS))
    assert shown in page, f"docs/grounding.md should show the table measured today:\n{shown}"


def test_the_check_meets_the_issue_thresholds_on_the_double(replies: dict[str, Any]) -> None:
    _done_when(measure(CASES, replies, CALLS))


@pytest.mark.live
@pytest.mark.timeout(300)
def test_live_wrong_answers_use_only_what_the_real_netbox_replied(live: dict[str, Any]) -> None:
    _held(LIVE_CASES, live, LIVE_CALLS)


@pytest.mark.live
@pytest.mark.timeout(300)
def test_the_check_meets_the_issue_thresholds_on_the_real_netbox(live: dict[str, Any]) -> None:
    _done_when(measure(LIVE_CASES, live, LIVE_CALLS))


@pytest.mark.live
@pytest.mark.timeout(300)
def test_the_docs_show_the_shares_measured_on_the_real_netbox(live: dict[str, Any]) -> None:
    page = (Path(__file__).parent.parent / "docs" / "grounding.md").read_text()
    shown = table(measure(LIVE_CASES, live, LIVE_CALLS))
    assert shown in page, f"docs/grounding.md should show the live table measured today:\n{shown}"
