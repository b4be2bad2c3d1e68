"""Which LangGraph saver a session writes through: the SQLite one for a
session file, the Postgres one for a database session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netbox_chat.store.choose import OpenSession
from netbox_chat.store.sessions import SessionFile

if TYPE_CHECKING:
    from netbox_chat.checkpoints.sqlite import SyncSaverBridge


def open_saver(session: OpenSession) -> SyncSaverBridge:
    """The session's LangGraph saver, on the session's own connection, behind
    the async bridge (slow imports). Told apart by the session file's class,
    already loaded: asking for the database's would load store/postgres.py
    ahead of every REPL's first prompt."""
    if isinstance(session, SessionFile):
        from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

        return BridgedSqliteSaver(session.db, session.id)
    from netbox_chat.checkpoints.postgres import BridgedPostgresSaver

    return BridgedPostgresSaver(session.db, session.store.url, session.id)
