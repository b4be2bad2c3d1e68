"""`resume` with no id on a terminal: pick the session from a list.

The list is the store's sessions, the most recently active first, as `ls`
orders them. What is typed filters it: a session stays when its title
(`/rename`, or the first question) or its id holds the text, or when one of
its questions or answers does (the store's own search, `ls --grep`'s), and
then shows the line that matched. ↑ and ↓ choose, Enter opens, Esc or Ctrl-C
leaves without opening anything. Titles and matched lines are someone's
text: shown on one line, control characters as escapes (`visible_line`).
"""

from __future__ import annotations

import functools
import shutil

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.processors import BeforeInput

from netbox_chat.store.choose import Store
from netbox_chat.store.summary import SessionSummary
from netbox_chat.ui.console import shorten
from netbox_chat.words import count, number

ROWS = 10
"""Sessions the list shows at most (fewer in a short terminal)."""

DIM = "fg:ansibrightblack"


class Picker:
    """The list and its filter; `rows()` is what the list window draws."""

    def __init__(self, store: Store, summaries: list[SessionSummary]) -> None:
        self.store = store
        self.summaries = summaries
        self.buffer = Buffer(multiline=False, on_text_changed=lambda _: self._refilter())
        self.shown: list[tuple[SessionSummary, str]] = [(s, "") for s in summaries]
        self.selected = 0

    @functools.cache  # noqa: B019 (one picker per process)
    def _search(self, text: str) -> dict[str, str]:
        return self.store.search(text)

    def _refilter(self) -> None:
        text = self.buffer.text.strip()
        folded = text.casefold()
        found = self._search(text) if text else {}
        self.shown = [
            (summary, "" if folded in summary.title.casefold() else found.get(summary.id, ""))
            for summary in self.summaries
            if not text
            or folded in summary.title.casefold()
            or summary.id.startswith(folded)
            or summary.id in found
        ]
        self.selected = 0

    def move(self, by: int) -> None:
        if self.shown:
            self.selected = max(0, min(len(self.shown) - 1, self.selected + by))

    def chosen(self) -> str | None:
        return self.shown[self.selected][0].id if self.shown else None

    def rows(self) -> StyleAndTextTuples:
        width = shutil.get_terminal_size().columns
        room = max(1, min(ROWS, shutil.get_terminal_size().lines - 3))
        first = max(0, self.selected - room + 1)
        lines: StyleAndTextTuples = []
        if not self.shown:
            return [(DIM, "  no session matches")]
        for at, (summary, matched) in enumerate(self.shown[first : first + room], start=first):
            mine = at == self.selected
            when = summary.last_active[:16].replace("T", " ")
            head = f"{'>' if mine else ' '} {summary.id}  {when}  {count(summary.turns, 'turn')}  "
            lines.append(("reverse" if mine else "", head))
            title = shorten(summary.title or "(untitled)", max(10, width - len(head) - 1))
            lines.append(("bold" if mine else "", title))
            if matched:
                lines.append(("", "\n"))
                lines.append((DIM, "      " + shorten(matched, max(10, width - 7))))
            lines.append(("", "\n"))
        if len(self.shown) > first + room:
            lines.append((DIM, f"  … {number(len(self.shown) - first - room)} more"))
        return lines


def pick_session(store: Store) -> str | None:
    """The id of the session picked from `store`'s list; None when the user
    left it (Esc, Ctrl-C, Ctrl-D) or the store holds none."""
    summaries = [s for s in store.list_sessions() if s.unreadable is None]
    if not summaries:
        return None
    picker = Picker(store, summaries)
    keys = KeyBindings()

    @keys.add("up")
    @keys.add("c-p")
    def _up(event: KeyPressEvent) -> None:
        del event
        picker.move(-1)

    @keys.add("down")
    @keys.add("c-n")
    def _down(event: KeyPressEvent) -> None:
        del event
        picker.move(1)

    @keys.add("enter")
    def _open(event: KeyPressEvent) -> None:
        if (chosen := picker.chosen()) is not None:
            event.app.exit(result=chosen)

    @keys.add("escape", eager=True)
    @keys.add("c-c")
    @keys.add("c-d")
    def _leave(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    header = "resume which session? type to filter, ↑↓ choose, Enter opens, Esc leaves"
    layout = Layout(
        HSplit(
            [
                Window(FormattedTextControl([(DIM, header)]), height=1),
                Window(
                    BufferControl(picker.buffer, input_processors=[BeforeInput("filter> ")]),
                    height=1,
                ),
                Window(FormattedTextControl(picker.rows), dont_extend_height=True),
            ]
        ),
        focused_element=picker.buffer,
    )
    app: Application[str | None] = Application(
        layout=layout, key_bindings=keys, erase_when_done=True
    )
    return app.run()
