"""Map the source paths and lines a report recorded onto files in the user's workspace.

A report names files as they were on the profiling machine, e.g. the build folder of a
`load_inline` extension (`~/.cache/torch_extensions/.../cuda.cu`), whose line L is line L-3 of
the CUDA string in the user's Python file (load_inline writes three include lines first). So we
never trust the absolute path alone. In order: the user's explicit `--map`, the path itself when
it exists with the same text, then the embedded source text (`--import-source yes`) aligned
line by line against candidate files (which finds the string inside a Python file wherever it
sits, and follows small edits), and last a file with the same base name.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# load_inline writes these before the user's CUDA source (torch >= 1.x; newer torch can skip).
LOAD_INLINE_PRELUDE = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
# A content match must cover at least this share of the report file's non-blank lines.
_MIN_MATCH_SHARE = 0.5
_MIN_PREFERRED_LINES = 3
_CANDIDATE_SUFFIXES = (".cu", ".cuh", ".py", ".h", ".hpp", ".cpp", ".cc")
_MAX_CANDIDATE_BYTES = 2_000_000


@dataclass
class FileMapping:
    """How one report file maps onto one local file."""

    report_path: str
    local_path: Path
    how: str  # "map", "path", "content" or "basename"
    # Aligned (report_line, local_line) pairs, 1-based; empty means identity.
    anchors: list[tuple[int, int]] = field(default_factory=list)
    offset: int = 0  # used when there are no anchors: local = report + offset

    def line(self, report_line: int) -> int:
        """The local line for a report line; between anchors, the nearest anchor's offset."""
        if not self.anchors:
            return max(1, report_line + self.offset)
        best = min(self.anchors, key=lambda a: abs(a[0] - report_line))
        return max(1, report_line + (best[1] - best[0]))


def _norm_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines()]


def _significant(line: str) -> bool:
    """Lines that say something about the code: not braces, blanks or include lines."""
    return sum(ch.isalnum() for ch in line) >= 4 and not line.startswith("#include")


def align(report_text: str, local_text: str) -> tuple[list[tuple[int, int]], int]:
    """Line anchors between two texts, and how many significant report lines matched."""
    a, b = _norm_lines(report_text), _norm_lines(local_text)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    anchors: list[tuple[int, int]] = []
    matched = 0
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            i, j = block.a + k, block.b + k
            if a[i]:
                anchors.append((i + 1, j + 1))
                matched += _significant(a[i])
    return anchors, matched


def _read(path: Path) -> str | None:
    """A candidate source's text; None for a FIFO, device or file over the cap (a report may
    name any path, and a FIFO reports size 0 and then blocks its reader)."""
    from stitch_lsp.files import read_text

    try:
        return read_text(path, _MAX_CANDIDATE_BYTES)
    except OSError:
        return None


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


class SourceMapper:
    """Resolves report paths to local files; one instance per report."""

    def __init__(
        self,
        sources: dict[str, str],
        explicit: dict[str, str] | None = None,
        candidates: Iterable[Path] = (),
        texts: dict[Path, str] | None = None,
        preferred: Path | None = None,
    ) -> None:
        self.sources = sources
        self.explicit = {k: Path(v).resolve() for k, v in (explicit or {}).items()}
        self.candidates = [Path(c).resolve() for c in candidates]
        # Open editor buffers win over the files on disk.
        self.texts: dict[Path, str] = {Path(k).resolve(): v for k, v in (texts or {}).items()}
        self._cache: dict[str, FileMapping | None] = {}
        # The file the user asked to profile: a weaker content match is enough for it.
        self.preferred = Path(preferred).resolve() if preferred else None

    def text_of(self, path: Path) -> str | None:
        if path not in self.texts:
            text = _read(path)
            if text is None:
                return None
            self.texts[path] = text
        return self.texts[path]

    def resolve(self, report_path: str | None) -> FileMapping | None:
        if not report_path:
            return None
        if report_path not in self._cache:
            self._cache[report_path] = self._resolve(report_path)
        return self._cache[report_path]

    def _resolve(self, report_path: str) -> FileMapping | None:
        embedded = self.sources.get(report_path)
        base = _basename(report_path)
        for key, local in self.explicit.items():
            if key in (report_path, base):
                return self._mapping(report_path, local, "map", embedded)
        here = Path(report_path)
        here_ok = here.is_file() and (embedded is None or self.text_of(here.resolve()) == embedded)
        if here_ok and (here.resolve() in self.candidates or here.resolve() == self.preferred):
            return FileMapping(report_path, here.resolve(), "path")
        # A build folder's copy (load_inline's cuda.cu) exists too, but the user edits the
        # workspace file that holds the same text: look there first.
        if embedded is not None:
            best: FileMapping | None = None
            best_score = 0
            own = [ln for ln in _norm_lines(embedded) if _significant(ln)]
            needed = max(1, int(_MIN_MATCH_SHARE * len(own)))
            wanted = set(own)
            floor = max(1, len(wanted) // 4)
            for cand in self.candidates:
                text = self.text_of(cand)
                # A cheap set test first: most files share no line with the report's source.
                if text is None or len(wanted.intersection(_norm_lines(text))) < floor:
                    continue
                anchors, matched = align(embedded, text)
                if matched >= needed and matched > best_score:
                    best, best_score = FileMapping(report_path, cand, "content", anchors), matched
            if best is not None:
                return best
            if self.preferred is not None and (text := self.text_of(self.preferred)) is not None:
                anchors, matched = align(embedded, text)
                if matched >= min(needed, _MIN_PREFERRED_LINES):
                    return FileMapping(report_path, self.preferred, "content", anchors)
        if here_ok:
            return FileMapping(report_path, here.resolve(), "path")
        for cand in self.candidates:
            if cand.name == base:
                return self._mapping(report_path, cand, "basename", embedded)
        return None

    def _mapping(
        self, report_path: str, local: Path, how: str, embedded: str | None
    ) -> FileMapping:
        text = self.text_of(local)
        if embedded is not None and text is not None:
            anchors, matched = align(embedded, text)
            if matched:
                return FileMapping(report_path, local, how, anchors)
        # No embedded source: a Python file holds the CUDA in a string that load_inline prefixed.
        offset = 0
        if local.suffix == ".py" and text is not None:
            offset = python_string_offset(text)
        return FileMapping(report_path, local, how, offset=offset)


def python_string_offset(text: str) -> int:
    """Line offset from a load_inline `cuda.cu` to the Python file, without the report's copy.

    The first CUDA-looking string (the one holding `__global__`) starts on some line S of the
    Python file; the string's line 1 is `cuda.cu` line 4, so local = report - 3 + (S - 1).
    """
    from stitch_lsp.profile.embedded import cuda_string_starts

    starts = cuda_string_starts(text)
    if not starts:
        return 0
    return starts[0] - 1 - len(LOAD_INLINE_PRELUDE)


_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "build", "site-packages"})


def workspace_candidates(
    roots: Iterable[Path], limit: int = 2000, max_entries: int | None = None
) -> list[Path]:
    """Source files under the given folders (and the files themselves), skipping hidden
    folders, virtualenvs and build output.

    The walk is bounded: it stops at `limit` files or after `max_entries` directory entries
    (default 50 per wanted file), whichever comes first, and it never follows a symlinked
    folder. Each folder's entries are sorted, so the same tree gives the same list. (It used to
    list and sort the whole tree before applying the limit: 13 s from `/`.)"""
    found: list[Path] = []
    budget = max_entries if max_entries is not None else 50 * limit
    seen: set[Path] = set()
    for root in roots:
        root = Path(root)
        if root.is_file():
            if root.resolve() not in seen:
                seen.add(root.resolve())
                found.append(root.resolve())
            continue
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            budget -= len(dirnames) + len(filenames)
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS
            )
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                p = Path(dirpath, name)
                if p.suffix in _CANDIDATE_SUFFIXES and p.is_file() and p.resolve() not in seen:
                    seen.add(p.resolve())
                    found.append(p.resolve())
                    if len(found) >= limit:
                        return found
            if budget <= 0:
                return found
    return found
