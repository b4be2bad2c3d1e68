"""Exit statuses and the one exception type every layer raises for the user.

Each layer raises `UserFacingError` (or a subclass) with a one-line message and
the exit status the CLI should end with, so the CLI never has to guess.
"""

from __future__ import annotations

from contextvars import ContextVar
from enum import IntEnum

PICK_MODEL: ContextVar[str] = ContextVar("pick_model", default="--model")
"""How the user picks another model where an error is read: `--model` on the
command line; the chat sets `/model NAME`, since an option cannot be given
there. Errors that name the fix say it through `pick_model()`."""


def pick_model() -> str:
    return PICK_MODEL.get()


class ExitStatus(IntEnum):
    """The documented exit codes (README, "When things go wrong")."""

    OK = 0
    USER_ERROR = 1  # no such session, bad id, bad config, a service said no
    USAGE = 2  # Typer/Click's own code for bad flags
    STORE_ERROR = 3  # the session store cannot be opened or written
    SESSION_BUSY = 4  # another netbox-chat process holds the session
    NETBOX_UNAVAILABLE = 5  # `ask` answered, but NetBox was unreachable or refused the token
    OUTCOME_UNKNOWN = 6  # the store failed as a turn's answer was recorded; kept or not is unknown
    BROKEN_PIPE = 141  # stdout's reader went away (`| head`): quiet, as 128 + SIGPIPE
    INTERRUPTED = 130  # a one-shot `ask` cancelled by Ctrl-C or SIGTERM, after rollback


class UserFacingError(Exception):
    """An error whose message is fit to print as the only line the user sees."""

    exit_status: ExitStatus = ExitStatus.USER_ERROR

    def __init__(self, message: str, *, exit_status: ExitStatus | None = None) -> None:
        super().__init__(message)
        if exit_status is not None:
            self.exit_status = exit_status


class StoreFailure(UserFacingError):
    """A store driver's own error that no layer put into words of its own (a
    connection lost where nothing expected it): the server's words, exit 3."""

    exit_status = ExitStatus.STORE_ERROR


_DRIVER_ERRORS: list[type[Exception]] = []


def add_driver_errors(kind: type[Exception]) -> None:
    """Registered by a store when it loads its driver (pgstore: psycopg.Error),
    so this module never imports one (a folder's `ls` must not pay for it)."""
    if kind not in _DRIVER_ERRORS:
        _DRIVER_ERRORS.append(kind)


def user_facing(error: Exception) -> Exception:
    """The error as the user is told it: a store driver's becomes a
    `StoreFailure` in its own first line; anything else is left as it is."""
    if isinstance(error, UserFacingError) or not isinstance(error, tuple(_DRIVER_ERRORS)):
        return error
    text = str(error).strip()
    first = text.splitlines()[0].strip() if text else type(error).__name__
    return StoreFailure(f"the session store failed: {first}")
