"""A streamed Markdown answer cut into finished pieces and an unfinished tail.

Rendering the whole answer again for every token costs time quadratic in its
length (a 25 kB table took minutes to draw, issue 25). A block that is
finished cannot change any more, so the terminal prints it once; only the
tail, the block still being written, is drawn again as tokens arrive. This
module decides where a block is finished, from the text alone: no parsing
of the whole answer, and each line is looked at once.

A cut is only ever made at the start of a line, and only where the text
before it renders the same alone as it would as part of the whole answer:

- after a blank line that ends a paragraph or a quote;
- after the closing line of a fenced code block (not inside a list);
- around an ATX heading (`## ...`), which is one line;
- a list or an indented code block may go on after a blank line, so it ends
  only when a line that is neither indented nor a list item follows one.

A table is the one block that is handed over before it ends: a long one is
most of a long answer. Its rows come in batches (`Finished.table` set), the
first batch with the header, so the terminal can fix the columns' widths
from the first rows and draw the rest under them as they arrive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])(\s|$)")
_DELIMITER_ROW = re.compile(r"^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")

FIRST_ROWS = 10
"""Body rows a table's first batch waits for: they set its columns' widths."""
MORE_ROWS = 10
"""Body rows in each later batch: few enough to follow the stream closely,
enough that laying each batch out costs little beside the rows' text."""


@dataclass(frozen=True)
class Finished:
    """Markdown that will not change any more: whole blocks, or, when `table`
    is set (the table's header and delimiter rows), some of its body rows."""

    text: str
    table: str = ""
    first: bool = False
    """The table's first rows: `text` starts with its header."""
    last: bool = False
    """The table ends after these rows (`text` may then be empty)."""


class MarkdownBlocks:
    """Takes text as it streams; hands back what has become finished.

    `feed()` returns the pieces finished by this text (often none), `tail` is
    what is not finished yet: while a table's rows stream after its first
    batch (`table_started`), the rows not handed over yet, without the header.
    Joined in order, the pieces and the tail are exactly the text fed.
    """

    def __init__(self) -> None:
        self.tail = ""
        self.table = ""  # the table under way's header and delimiter rows
        self.table_started = False  # its first batch was handed over
        self._scanned = 0  # offset in `tail` up to which whole lines were read
        self._rows = 0  # body rows in `tail`
        self._fence = ""  # the open fence's marker, "" outside a fence
        self._fence_in_list = False
        self._open_ended = False  # a list or indented code: a blank line may not end it
        self._after_blank = False
        self._block: list[str] = []  # the current block's lines, until it is known not a table
        self._block_start = 0

    def feed(self, text: str) -> list[Finished]:
        self.tail += text
        finished: list[Finished] = []
        while (end := self.tail.find("\n", self._scanned)) != -1:
            start, self._scanned = self._scanned, end + 1
            line = self.tail[start:end]
            if self.table:
                if line.lstrip().startswith("|"):
                    self._rows += 1
                    if self._rows >= (MORE_ROWS if self.table_started else FIRST_ROWS):
                        finished.append(self._table_rows(self._scanned, last=False))
                    continue
                finished.append(self._table_rows(start, last=True))
                start = 0
            before, after = self._line(line, start)
            if before and start:
                finished.append(Finished(self._take(start)))
            if after:
                finished.append(Finished(self._take(self._scanned)))
        return [piece for piece in finished if piece.text.strip() or piece.table]

    def _take(self, end: int) -> str:
        taken, self.tail = self.tail[:end], self.tail[end:]
        self._scanned -= end
        self._block_start = max(self._block_start - end, 0)
        return taken

    def _table_rows(self, end: int, *, last: bool) -> Finished:
        piece = Finished(self._take(end), self.table, first=not self.table_started, last=last)
        self.table_started = True
        self._rows = 0
        if last:
            self.table, self.table_started = "", False
        return piece

    def _line(self, line: str, start: int) -> tuple[bool, bool]:
        """Read one whole line, which begins at `start` in the tail; (the
        block ends before it, the block ends after it)."""
        if self._fence:
            stripped = line.strip()
            if stripped.startswith(self._fence) and not stripped.strip(self._fence[0]):
                self._fence = ""
                if not self._fence_in_list:
                    self._reset()
                    return False, True
            return False, False
        if not line.strip():
            self._after_blank = True
            if self._block and not self._open_ended:
                self._reset()
                return False, True
            return False, False
        before = False
        indented = line[:1] in (" ", "\t")
        ended = self._block and self._open_ended and self._after_blank
        if ended and not indented and not _LIST_ITEM.match(line):
            self._reset()
            before = True
        if _HEADING.match(line) and not (indented and self._open_ended):
            ended = before or bool(self._block)
            self._reset()
            return ended, True
        if not self._block:
            self._block_start = start
        elif self._starts_table(line):
            # Blank lines before the header stay in the tail: they draw nothing.
            self.table = self.tail[self._block_start : self._scanned]
            self._reset()
            return False, False
        if fence := _FENCE.match(line):
            marker = fence.group(1)
            self._fence = marker[0] * len(marker)
            self._fence_in_list = self._open_ended and bool(self._block)
        elif _LIST_ITEM.match(line):
            self._open_ended = True
        elif not self._block and line.startswith(("    ", "\t")):
            self._open_ended = True  # indented code
        self._block.append(line)
        self._after_blank = False
        return before, False

    def _starts_table(self, line: str) -> bool:
        """Whether `line` is the delimiter row under a table's header, the
        current block's one line (a table inside a list is left whole)."""
        if len(self._block) != 1 or self._open_ended or "|" not in self._block[0]:
            return False
        return bool(_DELIMITER_ROW.match(line))

    def _reset(self) -> None:
        self._open_ended = False
        self._after_blank = False
        self._block = []
        self._fence_in_list = False


def tail_preview(tail: str, lines: int) -> tuple[str, int]:
    """The last `lines` lines of an unfinished block, and how many are left
    out: the live area must fit on the screen, and drawing a whole long block
    at every refresh is the cost this module exists to avoid. A code block
    keeps its opening fence, a table its header, so the lines kept are drawn
    as what they are."""
    all_lines = tail.split("\n")
    if len(all_lines) <= lines:
        return tail, 0
    first = len(all_lines) - lines
    header: list[str] = []
    fence = ""
    for index, line in enumerate(all_lines[:first]):
        if fence:
            if line.strip().startswith(fence):
                fence, header = "", []
        elif match := _FENCE.match(line):
            fence, header = match.group(1), [line]
        elif index + 1 < first and "|" in line and _DELIMITER_ROW.match(all_lines[index + 1]):
            header = all_lines[index : index + 2]
    kept = header + all_lines[first:]
    return "\n".join(kept), first - len(header)
