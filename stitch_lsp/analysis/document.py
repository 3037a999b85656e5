"""One open text document: its text, its tree-sitter syntax, and incremental edits.

The server applies each LSP `didChange` content change with `apply_change`. A CUDA tree is
edited with `Tree.edit` and re-parsed with the old tree, so tree-sitter re-reads only what
changed; Python is kept as a `StatementForest`, which re-parses only the edited statements
(see `forest.py` for why). The text is kept as UTF-8 bytes because that is what tree-sitter
indexes.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from tree_sitter import Node, Tree

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.forest import Edit, StatementForest
from stitch_lsp.analysis.grammars import BudgetParser, LanguageName
from stitch_lsp.analysis.text_index import LineIndex

if TYPE_CHECKING:
    from stitch_lsp.analysis.large_text import UnparsedText

Range = tuple[int, int, int, int]  # 0-based (start_line, start_char, end_line, end_char), UTF-16

PYTHON_IDS = frozenset({"python"})
CUDA_IDS = frozenset({"cuda-cpp", "cuda", "cpp", "c"})
SUFFIX_LANGUAGE = {".py": "python", ".pyi": "python", ".cu": "cuda-cpp", ".cuh": "cuda-cpp"}


def grammar_for(language_id: str) -> LanguageName | None:
    """The tree-sitter grammar for an LSP language id, or None when we do not analyse it."""
    if language_id in PYTHON_IDS:
        return "python"
    if language_id in CUDA_IDS:
        return "cuda"
    return None


def uri_to_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if not parsed.scheme:
        return Path(uri)
    return None


_LONE_CR = re.compile(rb"\r(?!\n)")


def normalize_newlines(data: bytes) -> bytes:
    """Lone CRs (old Mac line ends) as LF, byte for byte. LSP and Python both count a lone CR as
    a line break, tree-sitter does not (it saw one long line and reported a false parse error);
    the same length keeps every offset, and CRLF stays as it is."""
    return _LONE_CR.sub(b"\n", data) if b"\r" in data else data


class Document:
    """Text + tree of one file. Parsing is lazy: a file too large to analyse is never parsed."""

    def __init__(self, uri: str, text: str, language_id: str, version: int = 0) -> None:
        self.uri = uri
        self.language_id = language_id
        self.version = version
        self.grammar: LanguageName | None = grammar_for(language_id)
        # Set by `from_path` for a file that is not UTF-8: (line, column) of the first bad byte.
        self.decode_error: tuple[int, int] | None = None
        self.parse_budget_s: float | None = grammars.PARSE_BUDGET_S
        self._parser: BudgetParser | None = None
        self._tree: Tree | None = None
        self._forest: StatementForest | None = None
        # The text as the editor has it, kept only while it holds lone CRs (see _set_text).
        self._raw: bytes | None = None
        self._set_text(text.encode("utf-8", "surrogatepass"))
        self.revision = 0  # bumps on every change; analysis caches key on it
        self.cache: dict[str, Any] = {}

    @classmethod
    def from_path(
        cls, path: Path | str, language_id: str | None = None, max_bytes: int | None = None
    ) -> Document:
        """Read a regular file (at most `max_bytes`: see `files.read_regular`); bytes that are
        not UTF-8 become U+FFFD and `decode_error` says where."""
        from stitch_lsp.files import DEFAULT_MAX_BYTES, read_regular

        path = Path(path)
        raw = normalize_newlines(read_regular(path, max_bytes or DEFAULT_MAX_BYTES))
        try:
            text = raw.decode("utf-8")
            bad: int | None = None
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", "replace")
            bad = exc.start
        lang = language_id or SUFFIX_LANGUAGE.get(path.suffix.lower(), "plaintext")
        doc = cls(path.resolve().as_uri(), text, lang)
        if bad is not None:
            row = raw.count(b"\n", 0, bad)
            col = bad - (raw.rfind(b"\n", 0, bad) + 1)
            doc.decode_error = (row, col)
        return doc

    def snapshot(self) -> Document:
        """A copy of this text with its own (not yet parsed) syntax, for analysing in another
        thread while this document keeps taking edits."""
        copy = Document(self.uri, "", self.language_id, self.version)
        copy._raw = self._raw
        copy._set_bytes(self.data, self.index)  # bytes and the line index are immutable
        copy.decode_error = self.decode_error
        copy.parse_budget_s = self.parse_budget_s
        copy.revision = self.revision
        return copy

    # -- text ---------------------------------------------------------------------------------
    def _set_text(self, raw: bytes) -> None:
        """A whole new text as the editor has it."""
        data = normalize_newlines(raw)
        self._raw = raw if data != raw else None
        self._set_bytes(data)

    def _set_bytes(self, data: bytes, index: LineIndex | None = None) -> None:
        self._unparsed: UnparsedText | None = None
        self._data = data
        self._index = index if index is not None else LineIndex(data)
        self._text: str | None = None
        self._binary: tuple[str | None] | None = None

    @property
    def data(self) -> bytes:
        """The text as UTF-8 bytes (immutable: snapshots and trees share them)."""
        if self._unparsed is not None:
            self._materialize()
        return self._data

    @property
    def index(self) -> LineIndex:
        if self._unparsed is not None:
            self._materialize()
        return self._index

    def _materialize(self) -> None:
        """Back from `apply_unparsed` edits to bytes and a full line index (once, on use)."""
        assert self._unparsed is not None
        self._set_bytes(bytes(self._unparsed.data))

    def apply_unparsed(self, range_: Range | None, text: str) -> None:
        """Apply an edit to a text that is not parsed (over maxFileBytes): in place, without
        re-indexing every line (see `large_text`). Lone CRs count as line breaks, as always."""
        from stitch_lsp.analysis.large_text import UnparsedText

        new = normalize_newlines(text.encode("utf-8", "surrogatepass"))
        if range_ is None:
            self._set_text(new)
        else:
            if self._unparsed is None:
                self._unparsed = UnparsedText(self._data, self._index)
                self._raw = None
            buf = self._unparsed
            sl, sc, el, ec = range_
            buf.replace(buf.offset(sl, sc), buf.offset(el, ec), new)
            self._text = None
            self._binary = None
        self._tree = None
        self._forest = None
        self.revision += 1

    @property
    def binary(self) -> str | None:
        """Why this text is not source code (NUL bytes, mostly non-UTF-8), or None."""
        if self._binary is None:
            from stitch_lsp.files import binary_reason

            self._binary = (binary_reason(self.data, self._text),)
        return self._binary[0]

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.data.decode("utf-8", "replace")
        return self._text

    @property
    def path(self) -> Path | None:
        return uri_to_path(self.uri)

    @property
    def size(self) -> int:
        return len(self._unparsed) if self._unparsed is not None else len(self._data)

    # -- syntax -------------------------------------------------------------------------------
    @property
    def roots(self) -> list[Node]:
        """Root nodes covering the file in order, parsed on first use: one tree for CUDA, one
        per run of top-level statements for Python; [] for languages we do not parse."""
        if self.grammar is None:
            return []
        if self._parser is None:
            self._parser = grammars.parser(self.grammar)
        self._start_clock()
        if self.grammar == "python":
            if self._forest is None:
                self._forest = StatementForest(self._parser, self.data, self.index)
            return self._forest.roots
        if self._tree is None:
            self._tree = self._parser.parse(self.data)
        return [self._tree.root_node]

    def split_runs(self) -> None:
        """Parse a Python text now as runs of statements of a few kilobytes each (see
        `StatementForest.split`); for a large file analysed in a worker thread."""
        if self.grammar == "python":
            self.roots  # noqa: B018  (parses)
            if self._forest is not None:
                self._start_clock()
                self._forest.split(self.data, self.index)

    def _start_clock(self) -> None:
        """Give the next parse its time budget (`grammars.ParseTimeout` when it runs over)."""
        if self._parser is not None:
            budget = self.parse_budget_s
            self._parser.deadline = None if budget is None else time.monotonic() + budget

    @property
    def tree_count(self) -> int:
        """How many trees the text is parsed into now (0 before the first parse)."""
        if self._forest is not None:
            return self._forest.run_count
        return int(self._tree is not None)

    @property
    def has_error(self) -> bool:
        return any(root.has_error for root in self.roots)

    # -- edits --------------------------------------------------------------------------------
    def apply_change(self, range_: Range | None, text: str, version: int | None = None) -> None:
        """Apply one LSP content change; `range_` None replaces the whole text."""
        new = text.encode("utf-8", "surrogatepass")
        replace_all: bytes | None = None
        if range_ is None:
            replace_all = new
        else:
            sl, sc, el, ec = range_
            index = self.index
            start_point = index.position_to_point((sl, sc))
            end_point = index.position_to_point((el, ec))
            if end_point < start_point:
                start_point, end_point = end_point, start_point
            start = index.point_to_byte(start_point)
            end = index.point_to_byte(end_point)
            joins_cr = start > 0 and self.data[start - 1] == 0x0D  # CR|LF split by the edit
            if self._raw is not None or b"\r" in new or joins_cr:
                # Lone CRs in play: edit the editor's text (same offsets), then normalise it
                # whole, so a CR and an LF typed next to it stay one line break, as the
                # editor counts them. Rare (old Mac files), so a full re-parse is fine.
                base = self._raw if self._raw is not None else self.data
                combined = base[:start] + new + base[end:]
                lo, hi = max(0, start - 1), start + len(new) + 2
                if self._raw is not None or _LONE_CR.search(combined, lo, hi):
                    replace_all = combined
        if replace_all is not None:
            self._set_text(replace_all)
            self._tree = None  # a full replace shares nothing worth reusing
            self._forest = None
        else:
            data = self.data[:start] + new + self.data[end:]
            newlines = new.count(b"\n")
            if newlines:
                new_end_point = (start_point[0] + newlines, len(new) - new.rfind(b"\n") - 1)
            else:
                new_end_point = (start_point[0], start_point[1] + len(new))
            edit = Edit(start, end, start + len(new), start_point, end_point, new_end_point)
            self._set_bytes(data, index.edited(data, start, end, new))
            self._start_clock()
            if self._forest is not None:
                self._forest.edit(edit, data, self.index)
            elif self._tree is not None:
                assert self._parser is not None
                self._tree = self._parser.parse(data, edit.applied(self._tree))
        if version is not None:
            self.version = version
        self.revision += 1

    # -- positions ----------------------------------------------------------------------------
    def node_range(self, start_point: tuple[int, int], end_point: tuple[int, int]) -> Range:
        """A tree-sitter (row, byte col) span as an LSP range."""
        a = self.index.point_to_position(start_point)
        b = self.index.point_to_position(end_point)
        return (a[0], a[1], b[0], b[1])
