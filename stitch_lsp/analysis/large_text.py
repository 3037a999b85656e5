"""The text of a document too large to analyse, edited in place.

A file over stitch.maxFileBytes is never parsed, but its edits must still be applied. Kept as
immutable bytes with a full line index, a keystroke in a 50 MB file copied the 50 MB twice and
shifted 700,000 line starts in Python: 0.5 s per key. Here the text is a bytearray (an insert is
one memmove) and only every CHECKPOINT_LINES-th line start is known (a few hundred numbers to
shift); a position is found from the nearest checkpoint with at most CHECKPOINT_LINES `find`s.
"""

from __future__ import annotations

from bisect import bisect_right

from stitch_lsp.analysis.text_index import LineIndex

CHECKPOINT_LINES = 2048


class UnparsedText:
    """A mutable UTF-8 text with coarse line checkpoints; LSP positions in UTF-16 units."""

    __slots__ = ("data", "lines", "offsets")

    def __init__(self, data: bytes, index: LineIndex) -> None:
        self.data = bytearray(data)
        starts = index.starts
        self.lines = list(range(0, len(starts), CHECKPOINT_LINES))
        self.offsets = [starts[i] for i in self.lines]

    def __len__(self) -> int:
        return len(self.data)

    def _line_start(self, line: int) -> int | None:
        """Offset of the start of `line`, or None past the last line."""
        k = bisect_right(self.lines, line) - 1
        row, pos = self.lines[k], self.offsets[k]
        data = self.data
        while row < line:
            nl = data.find(b"\n", pos)
            if nl < 0:
                return None
            pos, row = nl + 1, row + 1
        return pos

    def offset(self, line: int, character: int) -> int:
        """The byte offset of an LSP position, clamped as LSP says (past a line's end: its end;
        past the last line: the end of the text)."""
        start = self._line_start(max(line, 0))
        if start is None:
            return len(self.data)
        end = self.data.find(b"\n", start)
        end = len(self.data) if end < 0 else end
        raw = bytes(self.data[start:end])
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        char = max(character, 0)
        if raw.isascii():
            return start + min(char, len(raw))
        units = raw.decode("utf-8", "replace").encode("utf-16-le")[: 2 * char]
        prefix = units.decode("utf-16-le", "replace").encode("utf-8", "surrogatepass")
        return start + min(len(prefix), len(raw))

    def replace(self, start: int, end: int, new: bytes) -> None:
        """Bytes [start, end) become `new`; checkpoints after the edit move with it."""
        if end < start:
            start, end = end, start
        removed = self.data.count(b"\n", start, end)
        self.data[start:end] = new
        delta_bytes = len(new) - (end - start)
        delta_lines = new.count(b"\n") - removed
        k = bisect_right(self.offsets, start)
        # Checkpoints inside the replaced bytes no longer start a known line: drop them.
        drop = k
        while drop < len(self.offsets) and self.offsets[drop] <= end:
            drop += 1
        del self.offsets[k:drop], self.lines[k:drop]
        if delta_bytes or delta_lines:
            for i in range(k, len(self.offsets)):
                self.offsets[i] += delta_bytes
                self.lines[i] += delta_lines
