"""The process's own state from its first line: SIGINT and SIGTERM recorded
until a command takes them over, and the garbage collector paused through the
start-up's imports.

`ask` promises that a signal before its turn starts stops the turn from
starting (exit 130, nothing recorded), but its guard (`CancelOnSignals`) could
only be installed once the CLI was imported and Typer had dispatched to it: a
SIGTERM in that time killed the process (143). So the entry point
(cli/main.py) calls `arm` before any other import, and this module imports
nothing but the standard library (and typeahead, itself that light) so that
it can. The command then takes over: `ask`'s guard adopts a recorded signal as
its own (`pending`); every other command gets the default behaviour back and
a recorded signal delivered as it would have been (`release`).

A signal during the interpreter's own start-up, before the entry point runs,
still has the default effect: nothing of ours is running yet.

The cyclic garbage collector is also off from the first line until the
command's start-up is over (`started`). The imports ahead of the first prompt
make about 34,000 objects that live as long as the process; collecting while
they are made ran about 80 passes (7 % of the start-up's time) that found a
few hundred objects to free.

Base layer: the CLI, the REPL and the agent's runtime read this state, so it
lives below them all (it was entry.py's, which made an import circle).
"""

from __future__ import annotations

import gc
import signal
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # the first signal that came while armed
_armed: list[bool] = []
_collector_paused: list[bool] = []


def _record(signum: int, frame: FrameType | None) -> None:
    del frame
    if not _received:
        _received.append(signum)


def arm() -> None:
    """Record SIGINT and SIGTERM instead of acting on them, until a command
    takes them over."""
    for sig in SIGNALS:
        signal.signal(sig, _record)
    _armed.append(True)


def pending() -> int | None:
    """The signal that came before `ask`'s guard was installed (None: none)."""
    return _received[0] if _armed and _received else None


def release() -> None:
    """For every command but `ask`: SIGINT and SIGTERM act as usual again, and
    one that came during start-up is delivered now."""
    if not _armed:
        return
    _armed.clear()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _received:
        from netbox_chat import typeahead

        typeahead.restore()  # a SIGTERM ends the process here, exit handlers unrun
        signal.raise_signal(_received.pop())


def started() -> None:
    """The command's start-up is over (the REPL's: its first prompt is drawn;
    any other command's: Typer has dispatched to it). What start-up made lives
    as long as the process, so it is frozen out of the collector (as the built
    agent is, runtime.py), and the collector runs again for the work to come.
    Nothing when `main` did not pause it (the CLI called in-process)."""
    if _collector_paused:
        _collector_paused.clear()
        gc.freeze()
        gc.enable()


def freeze_survivors() -> None:
    """Between two turns, at the prompt: collect the garbage the last one
    left, then freeze what survived out of the collector, as `started` and
    the agent's build do. What a turn leaves alive (its messages, the kept
    history) lives as long as the session; unfrozen, it piled up until a
    full collection walked it, 50-110 ms in one turn of two on a 500-turn
    session under load, and most often in a turn's first moments, where the
    request is built, so a Ctrl-C there waited for it. Done at the prompt,
    only the last turn's objects are walked (1-4 ms). Nothing when the
    collector is off (paused through start-up)."""
    if gc.isenabled():
        gc.collect()
        gc.freeze()


def pause_collector() -> None:
    """Collect no garbage until `started`: before the first import."""
    gc.disable()
    _collector_paused.append(True)
