"""Which session store a command uses: a folder of session files (the
default) or a PostgreSQL database, from `--store` / `NETBOX_CHAT_STORE`.

Both kinds answer the same calls (`resolve`, `most_recent`, `list_sessions`,
`summarize`, `forget`, `open`, `create`), and their open sessions the same
ledger calls, so the commands never ask which one they have. The database
store's module is imported only when it is used: `ls` of a folder pays nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from netbox_chat.config import Settings
from netbox_chat.store.errors import NoSuchSession
from netbox_chat.store.ids import InvalidSessionId
from netbox_chat.store.sessions import SessionFile, SessionStore

if TYPE_CHECKING:
    from netbox_chat.store.postgres import PgSession, PgSessionStore

Store: TypeAlias = "SessionStore | PgSessionStore"
OpenSession: TypeAlias = "SessionFile | PgSession"


def open_store(settings: Settings) -> Store:
    """The configured store; nothing is connected or created yet."""
    if settings.store is not None:
        from netbox_chat.store.postgres import PgSessionStore

        return PgSessionStore(settings.store)
    return SessionStore(settings.sessions_dir)


def find_session(store: Store, text: str) -> str:
    """The session `text` names: its id or a unique prefix of it, else its
    title (`/rename`, or the first question's line), compared without case
    and runs of spaces; of several with that title, the most recently
    active. When none has it, the id's own one-line error (no such
    session, not an id, an ambiguous prefix)."""
    try:
        return store.resolve(text)
    except (InvalidSessionId, NoSuchSession):
        wanted = " ".join(text.split()).casefold()
        for summary in store.list_sessions():  # the most recently active first
            if wanted and " ".join(summary.title.split()).casefold() == wanted:
                return summary.id
        raise
