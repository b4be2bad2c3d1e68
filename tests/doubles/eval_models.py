"""Scripted models for eval: three personas answering by question text (right, wrong, slow)."""

from __future__ import annotations

from typing import Any

from netbox_chat.eval.questions import Question, build_questions
from netbox_chat.eval.truth import TruthClient
from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Delay, Reply, Text, ToolCall, by_question

MODELS = {name: ["completion", "tools"] for name in ("oracle", "twin", "flawed", "slow")}


def built(netbox: NetBoxDouble, seed: int = 7, per_template: int = 1) -> list[Question]:
    """The questions the CLI builds for this seed (same seed + same data)."""
    with TruthClient(netbox.url, TEST_TOKEN) as client:
        return build_questions(client, seed=seed, per_template=per_template).questions


def personas(questions: list[Question]) -> Any:
    """The three models, answering by question text (one tool call first)."""
    by_text = {q.text: (i, q) for i, q in enumerate(questions)}

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if question.startswith("You grade an answer"):
            return [Text("WRONG" if "Paris" in question else "CORRECT")]
        if not after_tool:
            return [LOOK]
        n, q = by_text[question]
        if model == "flawed":
            return [Text(wrong_answer(q, n)[0])]
        if model == "slow" and n == 2:
            return [Delay(30.0), Text(right_answer(q, n))]
        return [Text(right_answer(q, n))]

    return by_question(reply)


LOOK = ToolCall("netbox_get_objects", {"object_type": "dcim.device", "filters": {}})


def right_answer(q: Question, n: int) -> str:
    """The truth, phrased one of several ways (each must score right)."""
    e: Any = q.expected
    if q.kind == "count":
        if n % 3 == 0 and e < len(NUMBER_WORDS):
            return f"I found {NUMBER_WORDS[e]}."
        return ["There are **{}**.", "Count: {} in total.", "{} — that's the number."][
            n % 3
        ].format(e)
    if q.kind == "list":
        return ("They are: " if n % 2 else "Here they are\n\n- ") + (
            ", ".join(e) if n % 2 else "\n- ".join(f"`{name}`" for name in e)
        )
    if q.kind == "value":
        return [f"It is **{e}**.", f"`{e}`", f"The answer is {e}."][n % 3]
    if q.kind == "boolean":
        if e["yes"]:
            return "Yes, every one of them."
        return "No. Not all: " + " and ".join(e["exceptions"]) + "."
    if q.kind == "absence":
        # said of the asked set: "I found nothing." alone is a give-up
        return ["There are none.", "No such object exists in NetBox.", "I found no such one."][
            n % 3
        ]
    return str(e)  # an explanation: the reference itself


def wrong_answer(q: Question, n: int) -> tuple[str, str]:
    """(an answer wrong in one known way, the failure's name)."""
    e: Any = q.expected
    if q.kind == "count":
        if q.unscoped is not None:
            return f"There are {q.unscoped}.", "unscoped total"
        if e > 0 and n % 2:
            return "There are none.", "hallucinated none"
        return f"There are {e + 1}.", "wrong number"
    if q.kind == "list":
        if len(e) >= 2:
            return "They are: " + ", ".join(e[1:]) + ".", "missing item"
        extra = next((name for name in q.universe if name not in e), None)
        if extra is None:
            return "There are none.", "hallucinated none"
        return f"They are: {', '.join(e)}, {extra}.", "extra name"
    if q.kind == "value":
        other = next((v for v in q.universe if v != e), f"{e}0")
        return f"It is {other}.", "wrong value"
    if q.kind == "boolean":
        return ("No, not all." if e["yes"] else "Yes, all of them."), "wrong verdict"
    if q.kind == "absence":
        return "It is deployed at DM-Akron, in rack R101.", "confident answer to a false premise"
    return "It is a printer in Paris.", "explanation"


NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five"]


GIVE_UPS = (
    "I could not find that in NetBox with the tools I have.",
    "The tools did not return it.",
    "I couldn't find this information in NetBox.",
    "I was unable to find that.",
    "I don't have access to that data.",
    "Sorry, I can't answer that.",
    "The NetBox tools returned nothing useful for this question.",
    "I'm not able to retrieve that from NetBox.",
    "No results came back from NetBox for that query.",
    "I found nothing.",
    "Nothing was returned by the API.",
    "That information is not available to me.",
    "I wasn't able to look that up.",
    "Unfortunately the search came back empty.",
)
"""A give-up in many words, as models were seen to give one (issue 39): each is a
non-answer to every question, however its truth reads."""


def record(model: str, q: Question, answer: str, grounding: dict[str, Any] | None = None) -> dict:
    """A result line as a run writes it (runner.result_record), for the report's
    own tests: the answer scored by the real scorer, no turn run."""
    from netbox_chat.eval.scoring import score_question

    return {
        "model": model, "repeat": 0, "question": q.id, "tier": q.tier, "kind": q.kind,
        "domain": q.domain, "template": q.group, "session": f"s-{model}-{q.id}", "status": "done",
        "answer": answer, "tool_calls": [], "tokens": {"in": 1, "out": 1},
        "score": score_question(q, answer).as_json(), "seconds": 0.1,
        **({"grounding": grounding} if grounding is not None else {}),
    }  # fmt: skip
