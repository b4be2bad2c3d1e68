"""Session ids: the alphabet, making a new id, and checking an id or prefix a user typed.

Both stores name sessions with these ids, and a checked id is the only text
that ever becomes part of a session file's path or a lock's key.
"""

from __future__ import annotations

import os
import re

from netbox_chat.errors import UserFacingError

# Crockford's base32 in lower case: no i, l, o or u, so ids survive being
# read aloud or copied by hand.
ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
ID_LENGTH = 8
_ID_PREFIX = re.compile(rf"[{ID_ALPHABET}]{{1,{ID_LENGTH}}}")


class InvalidSessionId(UserFacingError):
    pass


def new_session_id() -> str:
    """Eight random characters of the id alphabet, straight from `os.urandom`.

    32 divides 256, so `byte % 32` is uniform; `secrets` would do the same
    and cost every command a few milliseconds of hashlib/OpenSSL imports."""
    return "".join(ID_ALPHABET[byte % len(ID_ALPHABET)] for byte in os.urandom(ID_LENGTH))


def normalize_session_id(text: str) -> str:
    """Validate a full id or a prefix typed by a user.

    Only the id alphabet is accepted, which rules out path traversal, absolute
    paths, separators, NUL and control characters before any path is built.
    """
    candidate = text.strip().lower()
    if not _ID_PREFIX.fullmatch(candidate):
        shown = text if len(text) <= 40 and text.isprintable() else repr(text[:40])
        raise InvalidSessionId(
            f"{shown!r} is not a session id: ids are 1-{ID_LENGTH} characters "
            f"from {ID_ALPHABET} (see `netbox-chat ls`)"
        )
    return candidate


def is_session_id(name: str) -> bool:
    """Whether `name` is a whole id as made here (a file name's stem in the
    sessions folder): anything else there is not a session."""
    return len(name) == ID_LENGTH and _ID_PREFIX.fullmatch(name) is not None
