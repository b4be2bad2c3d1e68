"""The `netbox-chat` entry point (`python -m netbox_chat` too): it arms the
process's signal and collector state before any other import (process.py),
holds the keys typed while a chat starts (typeahead.py), answers a Tab on a
session id before the CLI is imported (completion.py), and otherwise runs the
CLI (app.py). Nothing imports this module but the entry points.
"""

from __future__ import annotations

from netbox_chat import process


def main() -> None:
    """`netbox-chat`: arm, pause the collector, hold the keys typed while a
    chat starts, then a Tab on a session id or the CLI."""
    process.arm()
    process.pause_collector()
    import os
    import sys

    from netbox_chat import typeahead

    if typeahead.starts_a_chat(sys.argv, os.environ):
        typeahead.hold()
    from netbox_chat.cli.completion import COMPLETE_VAR, answer_session_id

    if COMPLETE_VAR in os.environ and (answer := answer_session_id(os.environ)) is not None:
        if answer.output is not None:
            sys.stdout.write(answer.output + "\n")  # as Typer echoes it
            sys.stdout.flush()
        raise SystemExit(answer.status)
    from netbox_chat.cli.app import main as run

    run()
