"""What a store refuses or fails at, each with the exit status the user sees.

Both stores raise these (the folder and PostgreSQL), and so do the
checkpoint savers that write into them, so they belong to neither store.
"""

from __future__ import annotations

from netbox_chat.errors import ExitStatus, UserFacingError


class NoSuchSession(UserFacingError):
    pass


class AmbiguousSession(UserFacingError):
    def __init__(self, prefix: str, candidates: list[str]) -> None:
        super().__init__(
            f"session id {prefix!r} is ambiguous: it matches {', '.join(sorted(candidates))}"
        )
        self.candidates = sorted(candidates)


class SessionBusy(UserFacingError):
    exit_status = ExitStatus.SESSION_BUSY

    def __init__(self, session_id: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "another process"
        super().__init__(f"session {session_id} is open in another netbox-chat ({holder})")
        self.pid = pid


class StoreError(UserFacingError):
    """The sessions folder or a session file cannot be created, opened or written."""

    exit_status = ExitStatus.STORE_ERROR


class OutcomeUnknown(StoreError):
    """A turn's answer was sent to the store, which failed before saying whether
    it was kept, and asking it again failed too. The next open settles it."""

    exit_status = ExitStatus.OUTCOME_UNKNOWN


class UnreadableSession(StoreError):
    """A file in the sessions folder that we will not open for writing."""
