"""Conversions between the three ways positions are named in a text.

tree-sitter speaks UTF-8 bytes (`(row, byte column)` points and byte offsets); LSP speaks
`(line, UTF-16 code unit)` positions. Mixing them up shifts every diagnostic after the first
non-ASCII character, so all conversions live here and take an all-ASCII fast path.
"""

from __future__ import annotations

import re
from bisect import bisect_right

Point = tuple[int, int]  # (row, byte column), as tree-sitter gives them
Position = tuple[int, int]  # (line, UTF-16 column), as LSP gives them

_NEWLINE = re.compile(b"\n")


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units (astral characters count twice)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


class LineIndex:
    """Line starts of one immutable text; O(log n) conversions between offsets and positions."""

    __slots__ = ("ascii", "data", "starts")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ascii = data.isascii()
        self.starts = [0, *(m.end() for m in _NEWLINE.finditer(data))]

    @classmethod
    def of_text(cls, text: str) -> LineIndex:
        return cls(text.encode("utf-8", "surrogatepass"))

    def edited(self, data: bytes, start: int, old_end: int, new: bytes) -> LineIndex:
        """The index of `data`, which is this text with bytes [start, old_end) replaced by
        `new`. Only the line starts after the edit move, so a keystroke costs a list shift
        rather than a scan of the whole file."""
        out = LineIndex.__new__(LineIndex)
        out.data = data
        out.ascii = data.isascii()
        starts = self.starts
        first = bisect_right(starts, start)  # line starts up to the edit stay
        last = bisect_right(starts, old_end)  # line starts after the replaced bytes move
        delta = len(new) - (old_end - start)
        inserted = [start + m.end() for m in _NEWLINE.finditer(new)]
        moved = [s + delta for s in starts[last:]] if delta else starts[last:]
        out.starts = [*starts[:first], *inserted, *moved]
        return out

    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line_bytes(self, row: int) -> bytes:
        """The bytes of line `row` without its terminator (`\\n` or `\\r\\n`)."""
        start = self.starts[row]
        end = self.starts[row + 1] - 1 if row + 1 < len(self.starts) else len(self.data)
        line = self.data[start:end]
        return line[:-1] if line.endswith(b"\r") else line

    # -- bytes <-> points -------------------------------------------------------------------
    def byte_to_point(self, offset: int) -> Point:
        offset = max(0, min(offset, len(self.data)))
        row = bisect_right(self.starts, offset) - 1
        return row, offset - self.starts[row]

    def point_to_byte(self, point: Point) -> int:
        row, col = point
        if row >= len(self.starts):
            return len(self.data)
        return min(self.starts[row] + max(col, 0), len(self.data))

    # -- points <-> LSP positions -----------------------------------------------------------
    def point_to_position(self, point: Point) -> Position:
        row, col = point
        if self.ascii or col == 0:
            return row, col
        row = min(row, len(self.starts) - 1)
        start = self.starts[row]
        prefix = self.data[start : start + col]
        if prefix.isascii():
            return row, col
        return row, utf16_len(prefix.decode("utf-8", "replace"))

    def position_to_point(self, position: Position) -> Point:
        """Clamp like LSP: a column past the end of the line means the end of the line."""
        line, char = position
        if line >= len(self.starts):
            return self.byte_to_point(len(self.data))
        line = max(line, 0)
        raw = self.line_bytes(line)
        char = max(char, 0)
        if self.ascii or raw.isascii():
            return line, min(char, len(raw))
        units = 0
        consumed = 0
        for ch in raw.decode("utf-8", "replace"):
            if units >= char:
                break
            units += 2 if ord(ch) > 0xFFFF else 1
            consumed += len(ch.encode("utf-8", "surrogatepass"))
        return line, min(consumed, len(raw))

    # -- bytes <-> LSP positions ------------------------------------------------------------
    def byte_to_position(self, offset: int) -> Position:
        return self.point_to_position(self.byte_to_point(offset))

    def position_to_byte(self, position: Position) -> int:
        return self.point_to_byte(self.position_to_point(position))
