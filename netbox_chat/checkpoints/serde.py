"""What a stored checkpoint value may decode to: an allow-list, and nothing else.

LangGraph's `JsonPlusSerializer` decodes msgpack "ext" records by importing the
module and calling the attribute the record names
(langgraph/checkpoint/serde/jsonplus.py, `_create_msgpack_ext_hook`). By
default any name is allowed; its strict mode only narrows that to a built-in
list, logs a warning and returns the record's raw arguments for anything else.
A session store is shared data (every teammate's role writes the team
database; `copy` brings in other people's files), so a row must never choose
code: here the ext records are decoded by our own hook, which builds exactly
the types this graph stores and raises for anything else, before any import
or call. See docs/design-notes.md, "Stored values are decoded from an
allow-list".

The list was taken from every value the graph wrote in the test suite's
sessions (rewind, compaction, cancelled tool calls, parallel tools) and in
sessions written by earlier releases; LangGraph's own encoder names each type
by its defining module, which is what is matched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_DELTA_SNAPSHOT,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Overwrite, Send

from netbox_chat.errors import ExitStatus, UserFacingError
from netbox_chat.visible import visible_line

_MESSAGES: dict[tuple[str, str], type[Any]] = {
    (cls.__module__, cls.__name__): cls for cls in (AIMessage, HumanMessage, ToolMessage)
}


def _send(arguments: Any) -> Send:
    # Send(node, arg) as the agent's tool dispatch writes it; a timeout is
    # LangGraph's optional third argument (jsonplus.py, `_send_from_args`).
    return Send(*arguments[:2], **({"timeout": arguments[2]} if len(arguments) > 2 else {}))


def _message(cls: type[Any]) -> Callable[[Any], Any]:
    # Built by its validating constructor, as LangGraph does; never its
    # `model_construct` fallback, which would take arguments unchecked.
    return lambda fields: cls(**fields)


# (ext code, module, name) -> how to build it from the record's arguments.
ALLOWED: dict[tuple[int, str, str], Callable[[Any], Any]] = {
    **{(EXT_PYDANTIC_V2, *key): _message(cls) for key, cls in _MESSAGES.items()},
    (EXT_CONSTRUCTOR_KW_ARGS, Overwrite.__module__, Overwrite.__name__): lambda kw: Overwrite(**kw),
    (EXT_CONSTRUCTOR_POS_ARGS, Send.__module__, Send.__name__): _send,
}

# The blob types LangGraph's encoder writes (jsonplus.py, `dumps_typed`); "json"
# and "pickle" are read by its decoder but never written by this program.
_PLAIN = {"null", "bytes", "bytearray"}


class RefusedValue(UserFacingError):
    """A stored value that this program never writes: refused unbuilt (exit 3)."""

    exit_status = ExitStatus.STORE_ERROR


class _Refused(Exception):
    """Raised inside the ext hook; ormsgpack replaces it with a ValueError,
    so what was refused travels beside it (`_Decoding.refused`)."""


class _Decoding:
    """One decode: the hook, and the first thing it refused."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def unpack(self, data: bytes) -> Any:
        return ormsgpack.unpackb(data, ext_hook=self.ext, option=ormsgpack.OPT_NON_STR_KEYS)

    def ext(self, code: int, data: bytes) -> Any:
        """Every record, at every depth, passes here: the ones it holds are
        built (or refused) first, then it is built only if it is allowed."""
        if code == EXT_DELTA_SNAPSHOT:
            return _DeltaSnapshot(self.unpack(data))
        record = self.unpack(data)
        named = isinstance(record, list) and len(record) >= 3
        key = (code, str(record[0]), str(record[1])) if named else (code, "?", "?")
        build = ALLOWED.get(key)
        if build is None:
            self.refused = f"{key[1]}.{key[2]}" if named else f"msgpack extension {code}"
            raise _Refused(self.refused)
        try:
            return build(record[2])
        except Exception as exc:  # the right type, with arguments it rejects
            self.refused = f"{key[1]}.{key[2]} ({type(exc).__name__})"
            raise _Refused(self.refused) from exc


class StoredValues(JsonPlusSerializer):
    """LangGraph's serializer for writing; for reading, only `ALLOWED` types.

    `session_id` names the session in the refusal, so the user knows which one
    holds the value."""

    def __init__(self, session_id: str) -> None:
        super().__init__(allowed_msgpack_modules=None, allowed_json_modules=None)
        self.session_id = session_id

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, raw = data
        if kind in _PLAIN:
            return super().loads_typed(data)
        if kind != "msgpack":
            raise self._refusal(f"a {kind!r} blob")
        decoding = _Decoding()
        try:
            return decoding.unpack(raw)
        except ValueError as exc:  # ormsgpack's error, also for a hook that raised
            raise self._refusal(decoding.refused or "a damaged value") from exc

    def _refusal(self, what: str) -> RefusedValue:
        shown = visible_line(what)[:120]
        return RefusedValue(
            f"session {self.session_id} holds a stored value of type {shown}, which "
            "netbox-chat never writes: refused, nothing of it was run"
        )
