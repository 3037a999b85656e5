"""One open text document: its text, its tree-sitter syntax, and incremental edits.

The server applies each LSP `didChange` content change with `apply_change`. A CUDA tree is
edited with `Tree.edit` and re-parsed with the old tree, so tree-sitter re-reads only what
changed; Python is kept as a `StatementForest`, which re-parses only the edited statements
(see `forest.py` for why). The text is kept as UTF-8 bytes because that is what tree-sitter
indexes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from tree_sitter import Node, Parser, Tree

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.forest import Edit, StatementForest
from stitch_lsp.analysis.grammars import LanguageName
from stitch_lsp.analysis.text_index import LineIndex

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


class Document:
    """Text + tree of one file. Parsing is lazy: a file too large to analyse is never parsed."""

    def __init__(self, uri: str, text: str, language_id: str, version: int = 0) -> None:
        self.uri = uri
        self.language_id = language_id
        self.version = version
        self.grammar: LanguageName | None = grammar_for(language_id)
        # Set by `from_path` for a file that is not UTF-8: (line, column) of the first bad byte.
        self.decode_error: tuple[int, int] | None = None
        self._parser: Parser | None = None
        self._tree: Tree | None = None
        self._forest: StatementForest | None = None
        self._set_bytes(text.encode("utf-8", "surrogatepass"))
        self.revision = 0  # bumps on every change; analysis caches key on it
        self.cache: dict[str, Any] = {}

    @classmethod
    def from_path(cls, path: Path | str, language_id: str | None = None) -> Document:
        """Read a file; bytes that are not UTF-8 become U+FFFD and `decode_error` says where."""
        path = Path(path)
        raw = path.read_bytes()
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

    # -- text ---------------------------------------------------------------------------------
    def _set_bytes(self, data: bytes, index: LineIndex | None = None) -> None:
        self.data = data
        self.index = index if index is not None else LineIndex(data)
        self._text: str | None = None

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
        return len(self.data)

    # -- syntax -------------------------------------------------------------------------------
    @property
    def roots(self) -> list[Node]:
        """Root nodes covering the file in order, parsed on first use: one tree for CUDA, one
        per run of top-level statements for Python; [] for languages we do not parse."""
        if self.grammar is None:
            return []
        if self._parser is None:
            self._parser = grammars.parser(self.grammar)
        if self.grammar == "python":
            if self._forest is None:
                self._forest = StatementForest(self._parser, self.data, self.index)
            return self._forest.roots
        if self._tree is None:
            self._tree = self._parser.parse(self.data)
        return [self._tree.root_node]

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
        if range_ is None:
            self._set_bytes(new)
            self._tree = None  # a full replace shares nothing worth reusing
            self._forest = None
        else:
            sl, sc, el, ec = range_
            index = self.index
            start_point = index.position_to_point((sl, sc))
            end_point = index.position_to_point((el, ec))
            if end_point < start_point:
                start_point, end_point = end_point, start_point
            start = index.point_to_byte(start_point)
            end = index.point_to_byte(end_point)
            data = self.data[:start] + new + self.data[end:]
            newlines = new.count(b"\n")
            if newlines:
                new_end_point = (start_point[0] + newlines, len(new) - new.rfind(b"\n") - 1)
            else:
                new_end_point = (start_point[0], start_point[1] + len(new))
            edit = Edit(start, end, start + len(new), start_point, end_point, new_end_point)
            self._set_bytes(data, index.edited(data, start, end, new))
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
