"""CUDA held in Python string literals, as a virtual CUDA document mapped back to the file.

A `load_inline(cuda_sources=...)` argument may be a raw triple-quoted string, adjacent
literals, a module-level variable, a `+` of literals, or a list of those (load_inline joins a
list with newlines). The decoder rebuilds the exact text Python would build, and records for
every stretch of it where it came from, so a kernel at virtual line 12 lands on the right
line of the `.py` file and a cursor in the file finds its place in the virtual text.
Strings built at run time (f-strings, `%`, `.format`, `+` with a non-literal) are declined
with a reason; they are never guessed at.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from tree_sitter import Node

from stitch_lsp.analysis.text_index import LineIndex, Position

Role = Literal["cuda_sources", "cpp_sources", "load_cuda", "string"]

# One Python escape sequence (bytes of the literal's body). Unknown escapes such as `\d`
# stay verbatim, as Python keeps them.
_ESCAPE = re.compile(
    rb"\\(\r\n|\n|[\\'\"abfnrtv]|[0-7]{1,3}|x[0-9a-fA-F]{2}|N\{[^}\n]*\}"
    rb"|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"
)


class Declined(Exception):
    """The expression is not a string we can know without running the program."""


@dataclass(slots=True)
class Segment:
    """Virtual bytes [v, v+v_len) came from document bytes [d, d+d_len).

    `verbatim` segments map byte for byte; an escape sequence or an inserted separator maps
    as a whole to its first byte.
    """

    v: int
    v_len: int
    d: int
    d_len: int
    verbatim: bool


class SourceBuilder:
    """Accumulates decoded string literals into one virtual text and its segment map."""

    def __init__(self, doc_data: bytes) -> None:
        self.doc = doc_data
        self.out = bytearray()
        self.segments: list[Segment] = []
        self.literals: list[Node] = []

    def _emit(self, value: bytes, d: int, d_len: int, verbatim: bool) -> None:
        if not value and not d_len:
            return
        self.segments.append(Segment(len(self.out), len(value), d, d_len, verbatim))
        self.out += value

    def separator(self, value: bytes) -> None:
        """Text that load_inline inserts between list items (a newline)."""
        at = self.segments[-1].d + self.segments[-1].d_len if self.segments else 0
        self._emit(value, at, 0, False)

    def add(self, node: Node, resolve: Callable[[Node], Node | None], depth: int = 0) -> None:
        """Append the value of a string expression, or raise Declined."""
        if depth > 16:
            raise Declined("string defined through too many names")
        kind = node.type
        if kind == "string":
            self._add_literal(node)
        elif kind == "concatenated_string":
            for child in node.named_children:
                self.add(child, resolve, depth + 1)
        elif kind == "parenthesized_expression":
            inner = [c for c in node.named_children if c.type != "comment"]
            if len(inner) != 1:
                raise Declined("not a single expression")
            self.add(inner[0], resolve, depth + 1)
        elif kind == "binary_operator":
            op = node.child_by_field_name("operator")
            if op is None or op.type != "+":
                raise Declined("string built with an operator other than +")
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is None or right is None:
                raise Declined("incomplete expression")
            self.add(left, resolve, depth + 1)
            self.add(right, resolve, depth + 1)
        elif kind == "identifier":
            target = resolve(node)
            if target is None:
                raise Declined(f"`{_text(node)}` is not a module-level string literal")
            self.add(target, resolve, depth + 1)
        elif kind == "call":
            raise Declined("string built at run time by a call")
        else:
            raise Declined(f"string built at run time ({kind})")

    def _add_literal(self, node: Node) -> None:
        start = node.child(0)
        end = node.child(node.child_count - 1)
        if start is None or end is None or start.type != "string_start" or end.type != "string_end":
            raise Declined("unterminated string")
        prefix = _text(start).rstrip("'\"").lower()
        if "f" in prefix or "t" in prefix:
            raise Declined("f-string: its text is only known at run time")
        if "b" in prefix:
            raise Declined("bytes literal, not source text")
        if any(c.type == "interpolation" for c in node.named_children):
            raise Declined("string with interpolation")
        self.literals.append(node)
        body_start, body_end = start.end_byte, end.start_byte
        body = self.doc[body_start:body_end]
        if "r" in prefix or b"\\" not in body:
            self._emit(body, body_start, len(body), True)
            return
        pos = 0
        for m in _ESCAPE.finditer(body):
            if m.start() > pos:
                self._emit(body[pos : m.start()], body_start + pos, m.start() - pos, True)
            esc = m.group(0)
            if esc[1:] in (b"\n", b"\r\n"):
                value = b""  # a backslash-newline continues the line and adds nothing
            else:
                try:
                    value = codecs.decode(esc, "unicode_escape").encode("utf-8", "surrogatepass")
                except UnicodeDecodeError as exc:
                    raise Declined(f"invalid escape {esc!r}") from exc
            # Even an empty result gets a segment, so a cursor on it still maps somewhere.
            self.segments.append(
                Segment(len(self.out), len(value), body_start + m.start(), len(esc), False)
            )
            self.out += value
            pos = m.end()
        if pos < len(body):
            self._emit(body[pos:], body_start + pos, len(body) - pos, True)


@lru_cache(maxsize=256)
def _virtual_index(data: bytes) -> LineIndex:
    """Line index of a virtual text; CUDA strings rarely change between keystrokes."""
    return LineIndex(data)


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


@dataclass(eq=False)
class EmbeddedCuda:
    """A virtual CUDA (or C++) document built from string literals in a Python file.

    `text` is exactly the string Python builds (for a load_inline list: the items joined
    with newlines, as load_inline joins them). Positions are 0-based LSP positions (UTF-16)
    on both sides. Note for ncu mapping: load_inline writes three `#include` lines before
    `cuda_sources`, so line L of its `cuda.cu` is virtual line L-4 (0-based) of this text.
    """

    data: bytes  # the virtual text, UTF-8, as tree-sitter parses it
    role: Role
    name: str | None  # the variable that holds it, when there is exactly one
    call_index: int | None  # which entry of Analysis.load_inline_calls uses it
    segments: list[Segment]
    doc_index: LineIndex
    literal_spans: list[tuple[int, int]] = field(default_factory=list)  # document bytes
    index: LineIndex = field(init=False)
    text: str = field(init=False)
    _by_doc: list[Segment] = field(init=False, repr=False)
    _by_doc_starts: list[int] = field(init=False, repr=False)
    _by_v_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = _virtual_index(self.data)
        self.text = self.data.decode("utf-8", "replace")
        self._by_v_starts = [s.v for s in self.segments]
        self._by_doc = sorted(self.segments, key=lambda s: s.d)
        self._by_doc_starts = [s.d for s in self._by_doc]

    # -- byte offsets ---------------------------------------------------------------------------
    def virtual_to_doc_byte(self, v: int) -> int:
        if not self.segments:
            return 0
        i = max(bisect_right(self._by_v_starts, v) - 1, 0)
        seg = self.segments[i]
        # Several segments may start at the same virtual byte (empty escapes): take the last.
        if seg.verbatim:
            return seg.d + min(max(v - seg.v, 0), seg.d_len)
        return seg.d if v < seg.v + seg.v_len or seg.v_len == 0 else seg.d + seg.d_len

    def doc_to_virtual_byte(self, d: int) -> int | None:
        i = bisect_right(self._by_doc_starts, d) - 1
        # Check the segment that starts at or before d, and its predecessor for end positions.
        for j in (i, i - 1):
            if j < 0 or j >= len(self._by_doc):
                continue
            seg = self._by_doc[j]
            if seg.d <= d < seg.d + seg.d_len or (d == seg.d + seg.d_len and seg.d_len):
                if seg.verbatim:
                    return seg.v + (d - seg.d)
                return seg.v if d < seg.d + seg.d_len else seg.v + seg.v_len
        return None

    # -- LSP positions --------------------------------------------------------------------------
    def to_document(self, line: int, char: int) -> Position:
        """Virtual (line, char) -> document (line, char)."""
        v = self.index.position_to_byte((line, char))
        return self.doc_index.byte_to_position(self.virtual_to_doc_byte(v))

    def to_virtual(self, line: int, char: int) -> Position | None:
        """Document (line, char) -> virtual (line, char), or None outside this string."""
        d = self.doc_index.position_to_byte((line, char))
        v = self.doc_to_virtual_byte(d)
        return None if v is None else self.index.byte_to_position(v)

    def contains(self, line: int, char: int) -> bool:
        return self.to_virtual(line, char) is not None

    def virtual_range_to_document(
        self, rng: tuple[int, int, int, int]
    ) -> tuple[int, int, int, int]:
        a = self.to_document(rng[0], rng[1])
        b = self.to_document(rng[2], rng[3])
        return (a[0], a[1], b[0], b[1])

    def virtual_bytes_to_document(self, start: int, end: int) -> tuple[int, int, int, int]:
        """A virtual byte span (what tree-sitter gives) as a document range."""
        a = self.doc_index.byte_to_position(self.virtual_to_doc_byte(start))
        b = self.doc_index.byte_to_position(self.virtual_to_doc_byte(end))
        return (a[0], a[1], b[0], b[1])


def build_embedded(
    exprs: list[Node],
    doc_data: bytes,
    doc_index: LineIndex,
    resolve: Callable[[Node], Node | None],
    role: Role,
    name: str | None = None,
    call_index: int | None = None,
) -> EmbeddedCuda:
    """Decode one or more string expressions (joined by newlines) or raise Declined."""
    builder = SourceBuilder(doc_data)
    for i, expr in enumerate(exprs):
        if i:
            builder.separator(b"\n")
        builder.add(expr, resolve)
    return EmbeddedCuda(
        data=bytes(builder.out),
        role=role,
        name=name,
        call_index=call_index,
        segments=builder.segments,
        doc_index=doc_index,
        literal_spans=[(n.start_byte, n.end_byte) for n in builder.literals],
    )
