"""A piece of start-up work run once on a daemon thread, started on demand.

The REPL draws its prompt before it has anything slow: the agent build
(seconds of imports) and the check of NetBox both start once the prompt is
up, each on its own thread, and whoever needs one first waits for it. Both
had the same shape (start once, a future, a waiter that Ctrl-C may cancel
without cancelling the work); `Once` is that shape, so the rules are kept in
one place:

- a daemon thread: a Ctrl-D at the prompt never waits for the work to end;
- the future is running from the start, so a cancelled waiter cannot cancel
  the work under the next one;
- the work runs in the starter's context (contextvars), so it words its
  errors as the starter would (errors.PICK_MODEL).

This module imports only the standard library: it is in the base layer so
that any layer may use it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    """`work` run at most once, on a daemon thread named `name`; its result
    (or the exception it raised) is kept for every waiter."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self.work = work
        self.name = name
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.started = False

    def start(self) -> None:
        """Start the work unless it has started already."""
        if self.started:
            return
        self.started = True
        self.future.set_running_or_notify_cancel()
        run = contextvars.copy_context().run
        threading.Thread(target=run, args=(self._run,), name=self.name, daemon=True).start()

    def _run(self) -> None:
        try:
            result = self.work()
        except BaseException as exc:  # kept for the waiter, who says it
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)

    async def get(self) -> T:
        """The work's result (started now if it was not), or its exception."""
        self.start()
        return await asyncio.wrap_future(self.future)

    def ready(self) -> T | None:
        """The result if the work has ended well; None while it runs, before
        it starts, or when it failed."""
        if self.future.done() and self.future.exception() is None:
            return self.future.result()
        return None
