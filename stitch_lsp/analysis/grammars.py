"""Tree-sitter languages and the query files in `grammars/`, compiled once per process.

Queries live as `.scm` files so they can be read and tuned without touching Python. A wheel
carries them as `stitch_lsp/grammars` (hatch force-include); an editable install reads the
repository's `grammars/` folder.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from bisect import bisect_right
from collections import OrderedDict
from functools import cache
from pathlib import Path
from typing import Literal

import tree_sitter_cuda
import tree_sitter_python
from tree_sitter import Language, Node, Parser, Point, Query, QueryCursor, Range, Tree

LanguageName = Literal["python", "cuda"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


@cache
def grammars_dir() -> Path:
    """The folder holding `python/*.scm` and `cuda/*.scm`."""
    for candidate in (_PACKAGE_DIR / "grammars", _PACKAGE_DIR.parent / "grammars"):
        if (candidate / "python").is_dir() and (candidate / "cuda").is_dir():
            return candidate
    raise FileNotFoundError(
        f"tree-sitter query files not found in {_PACKAGE_DIR / 'grammars'} "
        f"or {_PACKAGE_DIR.parent / 'grammars'}; the installation is incomplete"
    )


@cache
def language(name: LanguageName) -> Language:
    if name == "python":
        return Language(tree_sitter_python.language())
    return Language(tree_sitter_cuda.language())


STREAM_BYTES = 65536
"""Texts at least this long are fed to tree-sitter in chunks (see `BudgetParser`)."""
PARSE_BUDGET_S = 10.0
"""How long one document's parse may take before it is given up (a normal 5 MB file: ~1 s)."""


class ParseTimeout(RuntimeError):
    """A parse ran past its deadline and was stopped."""


class BudgetParser:
    """A tree-sitter parser that stops at a deadline and lets other threads run meanwhile.

    Parsing a bytes object holds the GIL for the whole parse: half a second for a 2 MB file,
    and tree-sitter's error recovery took 30 s on a megabyte of binary noise. A long text is
    therefore given through a read callback with a progress callback; tree-sitter then calls
    back into Python every few hundred steps, where the deadline is checked and the event loop's
    thread gets the interpreter (its longest wait fell from 456 ms to 46 ms on a 2 MB file).
    Short texts take the direct path, which is as fast as before.
    """

    __slots__ = ("_parser", "deadline")

    def __init__(self, lang: Language) -> None:
        self._parser = Parser(lang)
        self.deadline: float | None = None  # time.monotonic() value; None: no limit

    @property
    def included_ranges(self) -> list[Range]:
        return self._parser.included_ranges

    @included_ranges.setter
    def included_ranges(self, ranges: list[Range]) -> None:
        self._parser.included_ranges = ranges

    def parse(self, data: bytes, old_tree: Tree | None = None) -> Tree:
        if len(data) < STREAM_BYTES:
            # old_tree=None is refused at run time: leave the argument out instead.
            if old_tree is None:
                return self._parser.parse(data)
            return self._parser.parse(data, old_tree)
        deadline = self.deadline
        reader = _ChunkReader(data)

        def stop(_offset: int, _has_error: bool) -> bool:
            return deadline is not None and time.monotonic() > deadline

        try:
            if old_tree is None:
                tree = self._parser.parse(reader, progress_callback=stop)
            else:
                tree = self._parser.parse(reader, old_tree, progress_callback=stop)
        except ValueError as exc:  # "Parsing failed": the progress callback stopped it
            if deadline is not None and time.monotonic() > deadline:
                raise ParseTimeout(
                    f"parsing {len(data)} bytes took longer than the time budget"
                ) from exc
            raise
        reader.chunk = _TEXT_CHUNK
        return tree


_TEXT_CHUNK = 1024


class _ChunkReader:
    """The read callback of a streamed parse. The tree keeps it as its source, and `Node.text`
    calls it until the node is covered, so after the parse it hands out small pieces: a
    node's text then costs about its own length, not a 64 KB copy. (It must return `bytes`:
    `Node.text` takes the length of what it gets with PyBytes_Size.)"""

    __slots__ = ("chunk", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.chunk = STREAM_BYTES

    def __call__(self, offset: int, _point: Point) -> bytes:
        return self.data[offset : offset + self.chunk]


def parser(name: LanguageName) -> BudgetParser:
    """A fresh parser: parsers keep state, so each document owns its own."""
    return BudgetParser(language(name))


@cache
def query(name: LanguageName, file: str) -> Query:
    """Compile `grammars/<name>/<file>.scm` once."""
    path = grammars_dir() / name / f"{file}.scm"
    return Query(language(name), path.read_text(encoding="utf-8"))


def warm_up() -> None:
    """Compile every query now. The CUDA queries take a few hundred milliseconds to compile;
    a server calls this at start-up (in a thread) so the first didOpen does not pay for it."""
    root = grammars_dir()
    for name in ("python", "cuda"):
        for scm in sorted((root / name).glob("*.scm")):
            query(name, scm.stem)


def captures(
    name: LanguageName, file: str, node: Node, max_start_depth: int | None = None
) -> dict[str, list[Node]]:
    """Captures of one query file under `node`, each list in document order."""
    cursor = QueryCursor(query(name, file))
    if max_start_depth is not None:
        cursor.set_max_start_depth(max_start_depth)
    found = cursor.captures(node)
    for nodes in found.values():
        nodes.sort(key=lambda n: n.start_byte)
    return found


def matches(
    name: LanguageName, file: str, node: Node, max_start_depth: int | None = None
) -> list[tuple[int, dict[str, list[Node]]]]:
    """Matches of one query file under `node` (pattern index, captures). `max_start_depth`
    stops the cursor from descending: patterns anchored at the root need only depth 0-1."""
    cursor = QueryCursor(query(name, file))
    if max_start_depth is not None:
        cursor.set_max_start_depth(max_start_depth)
    return cursor.matches(node)


def find_all(data: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Every offset where one of `needles` occurs. bytes.find is far faster than a regex
    alternation over a large file, and the hits only need to be a superset."""
    hits: list[int] = []
    for needle in needles:
        at = data.find(needle)
        while at != -1:
            hits.append(at)
            at = data.find(needle, at + 1)
    return hits


class _RunHits:
    """Needle offsets per run of a file, keyed by the run's text: a keystroke changes one run,
    so the others are not scanned again."""

    def __init__(self, size: int = 1024) -> None:
        self._hits: OrderedDict[tuple, list[int]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def find(
        self, roots: list[Node], data: bytes, needles: tuple[bytes, ...], pattern: re.Pattern | None
    ) -> list[int]:
        out: list[int] = []
        for start, end in _chunks(roots, len(data)):
            segment = data[start:end]
            digest = hashlib.blake2b(segment, digest_size=16).digest()
            key = (needles, pattern.pattern if pattern is not None else None, digest)
            with self._lock:
                found = self._hits.get(key)
                if found is not None:
                    self._hits.move_to_end(key)
            if found is None:
                found = find_all(segment, needles)
                if pattern is not None:
                    found += [m.start() for m in pattern.finditer(segment)]
                with self._lock:
                    self._hits[key] = found
                    while len(self._hits) > self._size:
                        self._hits.popitem(last=False)
            out.extend(start + at for at in found)
        return out


_CHUNK_BYTES = 8192


def _chunks(roots: list[Node], size: int) -> list[tuple[int, int]]:
    """Byte ranges to scan: each run, and a large run (a whole file that does not parse, or
    one long statement run) cut at its top-level statements into pieces of about 8 KB, so an
    edit changes one piece. Needles do not span lines, and cuts are at statement starts."""
    out: list[tuple[int, int]] = []
    for root in roots:
        start, end = root.start_byte, min(root.end_byte, size)
        if end - start <= 2 * _CHUNK_BYTES:
            out.append((start, end))
            continue
        cut = start
        for child in root.children:
            if child.start_byte - cut >= _CHUNK_BYTES and child.start_point[1] == 0:
                out.append((cut, child.start_byte))
                cut = child.start_byte
        out.append((cut, end))
    return out


_RUN_HITS = _RunHits()


def find_in_runs(
    roots: list[Node], data: bytes, needles: tuple[bytes, ...], pattern: re.Pattern | None = None
) -> list[int]:
    """`find_all` (and a regex's matches) over a file given as its runs' roots, remembering each
    run's hits: the cost of many needles is paid only for the run that changed."""
    return _RUN_HITS.find(roots, data, needles, pattern)


def statements_at(roots: list[Node], offsets: list[int]) -> list[Node]:
    """The distinct top-level statements that contain the given byte offsets, in order.

    `roots` are a file's root nodes in order (see `Document.roots`). Queries over a whole
    3,000-line file cost milliseconds; a cheap regex over the bytes finds where a pattern can
    possibly match, and the query then runs on those statements only."""
    found: dict[int, Node] = {}
    starts = [r.start_byte for r in roots]
    for offset in offsets:
        i = bisect_right(starts, offset) - 1
        if i < 0:
            continue
        root = roots[i]
        node = root.descendant_for_byte_range(offset, offset)
        if node is None:
            continue
        while node.parent is not None and node.parent != root:
            node = node.parent
        if node != root:
            found.setdefault(node.start_byte, node)
    return [found[k] for k in sorted(found)]


def captures_in(
    name: LanguageName, file: str, nodes: list[Node], max_start_depth: int | None = None
) -> dict[str, list[Node]]:
    """`captures` over several subtrees, merged."""
    merged: dict[str, list[Node]] = {}
    for node in nodes:
        for key, found in captures(name, file, node, max_start_depth).items():
            merged.setdefault(key, []).extend(found)
    return merged
