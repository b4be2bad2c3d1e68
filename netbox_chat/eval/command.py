"""`netbox-chat eval`, from resolved settings to the exit status: build or
reload the questions, run them with a progress bar, print the report.

cli/app.py imports this module inside the command only, so no other command pays
for it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from netbox_chat.config import Settings, not_configured, source_of, without_userinfo
from netbox_chat.errors import ExitStatus, UserFacingError
from netbox_chat.eval.questions import (
    BuildReport,
    Question,
    build_lines,
    build_questions,
    changed_types,
    data_now,
)
from netbox_chat.eval.report import markdown, one_line, summarize
from netbox_chat.eval.runfolder import Plan, RunFolder
from netbox_chat.eval.truth import TruthClient
from netbox_chat.visible import visible_json, visible_line


@dataclass(frozen=True)
class EvalOptions:
    models: tuple[str, ...]
    seed: int = 0
    per_template: int = 3
    limit: int | None = None
    repeat: int = 1
    parallel: int = 1
    conversation: bool = False
    judge: str | None = None
    questions_file: Path | None = None
    list_only: bool = False
    as_json: bool = False
    show_right: bool = False
    resume: str | None = None
    runs_dir: Path = Path("eval-runs")


def truth_client(settings: Settings) -> TruthClient:
    if settings.netbox_url is None:
        raise UserFacingError(not_configured())
    return TruthClient(
        settings.netbox_url,
        settings.netbox_token,
        timeout=settings.netbox_timeout,
        url_from=source_of(settings, "netbox_url"),
        token_from=source_of(settings, "token"),
    )


def make_questions(
    settings: Settings, options: EvalOptions, err: Console
) -> tuple[list[Question], BuildReport]:
    """The built questions plus the user's file, truth computed now, and what
    the build could not do (said on stderr here, kept in the plan)."""
    from netbox_chat.eval.custom import load_questions

    with truth_client(settings) as client:
        started = time.monotonic()
        built = build_questions(
            client, seed=options.seed, per_template=options.per_template, limit=options.limit
        )
        questions = built.questions
        if options.questions_file is not None:
            questions = questions + load_questions(options.questions_file, client)
        err.print(
            visible_line(
                f"netbox-chat: {len(questions)} questions from "
                f"{without_userinfo(settings.netbox_url or '', '***@')} "
                f"({client.calls} NetBox requests, {time.monotonic() - started:.1f} s)"
                + "".join(f"; {line}" for line in build_lines(built.skipped, built.absent, {}))
            ),
            style="dim",
            markup=False,
            highlight=False,
        )
        for line in build_lines((), {}, built.left_out):
            err.print(visible_line(f"netbox-chat: {line}"), style="yellow", markup=False)
    return questions, built


def list_questions(
    questions: list[Question], built: BuildReport, options: EvalOptions, out: Console
) -> None:
    if options.as_json:
        listing = {
            "seed": options.seed,
            "left_out": built.left_out,
            "no_data": built.skipped,
            "absent": built.absent,
            "data": built.data,
            "questions": [q.as_json() for q in questions],
        }
        print(visible_json(json.dumps(listing, indent=2, ensure_ascii=False)))
        return
    for q in questions:
        query = "typed in" if q.query is None else q.query.text()
        out.print(
            visible_line(
                f"{q.id} [{q.tier} {q.kind} {q.domain}] {q.text} -> "
                f"{json.dumps(q.expected, ensure_ascii=False)} ({query})"
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def run_eval(settings: Settings, options: EvalOptions, out: Console, err: Console) -> int:
    """The whole command; returns the exit status."""
    from netbox_chat.eval.runner import check_models

    if options.resume is not None:
        folder = RunFolder.open(options.runs_dir, options.resume)
        plan = folder.plan()
        settings = _same_netbox(settings, plan, err)
        _same_data(settings, plan, err)
        check_models(settings, [*plan.models, *([plan.judge] if plan.judge else [])])
        _forget_unanswered(folder)
    else:
        if not options.list_only:
            check_models(settings, [*options.models, *([options.judge] if options.judge else [])])
        questions, built = make_questions(settings, options, err)
        if options.list_only:
            list_questions(questions, built, options, out)
            return ExitStatus.OK
        if not questions:
            why = next(iter(built.left_out.values()), "")
            raise UserFacingError(
                f"no question could be built: {why}"
                if why
                else "this NetBox has no data any question could be built from"
            )
        plan = Plan(
            models=options.models,
            questions=tuple(questions),
            seed=options.seed,
            repeat=options.repeat,
            conversation=options.conversation,
            judge=options.judge,
            netbox_url=settings.netbox_url,
            left_out=built.left_out,
            absent=built.absent,
            data=built.data,
        )
        folder = RunFolder.create(options.runs_dir, plan)
    err.print(f"netbox-chat: run {folder.id} in {folder.root}", style="dim", markup=False)
    interrupted = _run(folder, plan, settings, err, options.parallel)
    summary = summarize(plan, folder.results(), run=folder.id)
    folder.write("report.json", json.dumps(summary, indent=1, ensure_ascii=False, default=str))
    folder.write("report.md", markdown(summary, show_right=True))  # the whole record
    text = markdown(summary, show_right=options.show_right)
    if options.as_json:
        print(visible_json(json.dumps(summary, indent=2, ensure_ascii=False, default=str)))
    elif out.is_terminal:
        from netbox_chat.ui.console import markdown as rendered

        out.print(rendered(text))
    else:
        print(visible_text(text), end="")
    if not out.is_terminal:
        err.print(visible_line(f"netbox-chat: {one_line(summary)}"), markup=False, highlight=False)
    if interrupted:
        err.print(
            f"netbox-chat: stopped; every finished answer is kept: "
            f"netbox-chat eval --resume {folder.id} finishes the run",
            style="yellow",
            markup=False,
        )
        return ExitStatus.INTERRUPTED
    return ExitStatus.OK


def visible_text(text: str) -> str:
    """The report with every line made safe for the terminal (answers and names are
    from a model and from NetBox)."""
    return "".join(visible_line(line) + "\n" for line in text.splitlines())


def _same_netbox(settings: Settings, plan: Plan, err: Console) -> Settings:
    """The run's truth fits only the NetBox it was computed from (compared, and
    named, without any `user:password@`: the plan never holds one)."""
    if not (plan.netbox_url and settings.netbox_url):
        return settings
    now = without_userinfo(settings.netbox_url)
    if plan.netbox_url != now:
        raise UserFacingError(
            f"the run was made against {plan.netbox_url}, this one talks to "
            f"{now}: its truth would not fit"
        )
    return settings


def _same_data(settings: Settings, plan: Plan, err: Console) -> None:
    """A resumed run keeps the truth it was built with; when NetBox's data has
    changed since, the rest of the answers are scored against data that is no
    longer there, and the user is told so (one line; a check that cannot read
    says that instead and the run goes on)."""
    if not plan.data:
        return
    try:
        with truth_client(settings) as client:
            now = data_now(client)
    except UserFacingError as exc:
        err.print(visible_line(f"netbox-chat: cannot tell whether NetBox's data changed: {exc}"))
        return
    changed = changed_types(plan.data, now)
    if changed:
        err.print(
            visible_line(
                f"netbox-chat: NetBox's data changed since this run was built "
                f"({', '.join(changed)}): the run keeps the truth it was built with"
            ),
            style="yellow",
            markup=False,
            highlight=False,
        )


def _forget_unanswered(folder: RunFolder) -> None:
    """Sessions a kill -9 left without a finished turn: their questions are asked again."""
    store = folder.store()
    if not store.root.exists():
        return
    for session_id in store.unanswered():
        try:
            store.forget(session_id)
        except UserFacingError:
            continue


def _run(folder: RunFolder, plan: Plan, settings: Settings, err: Console, parallel: int) -> bool:
    """Ask what is pending, `parallel` at once; True when a signal stopped the run."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from netbox_chat.agent.runtime import CancelOnSignals
    from netbox_chat.eval.runner import Runner

    done = folder.results()
    pending = folder.pending(plan, done)
    total = len(plan.items())
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("eval", total=total, completed=total - len(pending))
    right = sum(1 for r in done if r["score"]["correct"])

    def progress(model: str, rep: int, question: Question, result: dict[str, Any] | None) -> None:
        nonlocal right
        if result is None:
            line = f"{model} #{rep + 1} {question.id} ({right} right so far)"
            bar.update(task, description=visible_line(line))
            return
        right += bool(result["score"]["correct"])
        bar.update(task, advance=1)

    with CancelOnSignals() as signals, bar:
        runner = Runner(folder, plan, settings, signals, progress, parallel=parallel)
        asyncio.run(runner.run(pending))
        signals.settle()
    return runner.interrupted or signals.received is not None
