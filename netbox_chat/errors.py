"""Exit statuses and the one exception type every layer raises for the user.

Each layer raises `UserFacingError` (or a subclass) with a one-line message and
the exit status the CLI should end with, so the CLI never has to guess.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """The documented exit codes (README, "When things go wrong")."""

    OK = 0
    USER_ERROR = 1  # no such session, bad id, bad config, a service said no
    USAGE = 2  # Typer/Click's own code for bad flags
    STORE_ERROR = 3  # the session store cannot be opened or written
    SESSION_BUSY = 4  # another netbox-chat process holds the session
    NETBOX_UNAVAILABLE = 5  # `ask` answered, but NetBox was unreachable or refused the token
    BROKEN_PIPE = 141  # stdout's reader went away (`| head`): quiet, as 128 + SIGPIPE
    INTERRUPTED = 130  # a one-shot `ask` cancelled by Ctrl-C or SIGTERM, after rollback


class UserFacingError(Exception):
    """An error whose message is fit to print as the only line the user sees."""

    exit_status: ExitStatus = ExitStatus.USER_ERROR

    def __init__(self, message: str, *, exit_status: ExitStatus | None = None) -> None:
        super().__init__(message)
        if exit_status is not None:
            self.exit_status = exit_status
