"""A Python file as runs of top-level statements, each run parsed into its own tree.

Why: tree-sitter-python cannot reuse nodes across a statement boundary after an edit (every
statement starts with a token lexed in a state where the indentation scanner is active, and
tree-sitter only reuses such tokens in the same parse state), so an incremental re-parse
re-reads everything after the edit: about 8 ms for a 3,000-line file. A top-level statement
that starts in column 0 is parsed the same way whatever precedes it, once the preceding code
is complete. So the file is cut at such statements into runs of a few kilobytes; an edit
re-parses only its own run(s) and moves the later runs' trees by the edit's offset, which
tree-sitter does without re-reading them.

Each run is parsed from the whole text with `included_ranges`, so node positions are file
positions and queries see ordinary `module` roots. When an edited run has a syntax error
(tree-sitter's error recovery can reach back over earlier statements) or runs on past its
end (a line continuation), the whole file is parsed as one tree again, and stays one tree
until it parses cleanly. While it is broken, edits only record the text, and the next read
of `roots` parses it afresh, once for any number of keystrokes. So the forest always equals a
whole-file parse, node for node, and the same text gives the same diagnostics whatever the
edits that led to it (`tests/analysis/test_forest.py` checks this on random edits).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from math import isqrt

from tree_sitter import Node, Range, Tree

from stitch_lsp.analysis.grammars import BudgetParser
from stitch_lsp.analysis.text_index import LineIndex, Point

# Run size: re-parsing a run costs about its length; moving the runs after an edit costs
# about their count. sqrt(600 * file bytes) balances the two (7.5 KB for a 100 KB file).
MIN_RUN_BYTES = 2048
MAX_RUN_BYTES = 65536


def run_bytes_for(size: int) -> int:
    return max(MIN_RUN_BYTES, min(MAX_RUN_BYTES, isqrt(600 * size)))


@dataclass(frozen=True, slots=True)
class Edit:
    """One text change in tree-sitter terms: byte offsets and (row, byte column) points."""

    start: int
    old_end: int
    new_end: int
    start_point: Point
    old_end_point: Point
    new_end_point: Point

    def applied(self, tree: Tree) -> Tree:
        """A copy of `tree` moved by this edit; the original may still be read by an older
        analysis."""
        moved = tree.copy()
        moved.edit(
            start_byte=self.start,
            old_end_byte=self.old_end,
            new_end_byte=self.new_end,
            start_point=self.start_point,
            old_end_point=self.old_end_point,
            new_end_point=self.new_end_point,
        )
        return moved


@dataclass(slots=True)
class Run:
    """Bytes [start, end) of the file; `tree` is None until the run is parsed on its own."""

    start: int
    end: int
    tree: Tree | None = None


class StatementForest:
    """The syntax of one Python text as a list of run trees; see the module docstring."""

    def __init__(
        self, parser: BudgetParser, data: bytes, index: LineIndex, run_bytes: int | None = None
    ) -> None:
        self._parser = parser
        self._run_bytes = run_bytes  # fixed run size, for tests; None sizes runs by the file
        # While the text does not parse, edits only record the text; the next read parses it.
        self._unparsed: tuple[bytes, LineIndex] | None = None
        self._runs = [Run(0, len(data))]
        self._parse_runs(data, index, self._runs)

    @property
    def roots(self) -> list[Node]:
        """The `module` node of each run, in file order; their children are disjoint."""
        if self._unparsed is not None:
            data, index = self._unparsed
            self._unparsed = None
            self._runs = [Run(0, len(data))]
            self._parse(data, index, self._runs[0])
        return [run.tree.root_node for run in self._runs if run.tree is not None]

    @property
    def run_count(self) -> int:
        return 1 if self._unparsed is not None else len(self._runs)

    def edit(self, edit: Edit, data: bytes, index: LineIndex) -> None:
        """Follow one edit; `data` and `index` are the text after it."""
        if self._unparsed is not None or (len(self._runs) == 1 and _has_error(self._runs[0])):
            # A broken file is parsed whole and afresh anyway (see below), so nothing is kept
            # up to date: keystrokes between two reads cost nothing, the read one parse.
            self._unparsed = (data, index)
            return
        self._split_touched(edit)
        runs = self._runs
        starts = [r.start for r in runs]
        first = bisect_right(starts, edit.start) - 1
        last = max(first, bisect_right(starts, edit.old_end) - 1)
        # An edit on a run's first line can join that statement to the previous run's code
        # (an `elif`, an indent), so the previous run is re-parsed with it. Offsets before
        # the edit are the same in the new text, so the new index gives the run's row.
        if first > 0 and edit.start_point[0] == index.byte_to_point(runs[first].start)[0]:
            first -= 1
        delta = edit.new_end - edit.old_end
        shifted = delta != 0 or edit.new_end_point[0] != edit.old_end_point[0]
        before = runs[:first]
        after = [self._moved(run, edit, delta) if shifted else run for run in runs[last + 1 :]]
        region = Run(runs[first].start, runs[last].end + delta)
        # One clean run (a file with no top-level statement to cut at, or a large class):
        # re-parse it incrementally, which re-reads only from the edit to the run's end.
        reused = first == last and runs[first].tree is not None and not _has_error(runs[first])
        if reused:
            region.tree = self._moved(runs[first], edit, delta).tree
        self._parse(data, index, region)
        if _has_error(region) and (before or after or reused):
            # tree-sitter's error recovery can reach back over earlier statements, and an
            # incremental re-parse may recover differently from a fresh one: a fresh
            # whole-file parse is the only tree that does not depend on the edit history.
            # The file stays one tree until it parses cleanly again.
            self._unparsed = (data, index)
            return
        if after and _runs_on(region, data):
            self._unparsed = (data, index)  # a line continuation into the next run
            return
        for run in before:
            if run.tree is None:  # cut from a large run just now
                self._parse(data, index, run)
        for run in after:
            if run.tree is None or shifted:
                self._parse(data, index, run)
        self._runs = [*before, *([region] if region.tree is not None else []), *after]

    def split(self, data: bytes, index: LineIndex) -> None:
        """Cut one large clean run into runs of the target size, each parsed on its own.

        For a file analysed off the event loop: a query over one 2 MB root is one C call that
        holds the GIL for 100-250 ms, over its runs it is many short ones."""
        if self._unparsed is not None or len(self._runs) != 1 or _has_error(self._runs[0]):
            return
        run = self._runs[0]
        target = self._run_bytes or run_bytes_for(run.end - run.start)
        if run.tree is None or run.end - run.start <= 2 * target:
            return
        cuts = _cut_points(run.tree.root_node, run.start, target)
        if not cuts:
            return
        runs = [Run(a, b) for a, b in pairwise([run.start, *cuts, run.end])]
        self._parse_runs(data, index, runs)
        if not any(_has_error(r) for r in runs):
            self._runs = runs

    # -- internals --------------------------------------------------------------------------
    def _parse(self, data: bytes, index: LineIndex, run: Run) -> None:
        """Parse `run` from `data`, reusing `run.tree` (already edited) where it can."""
        parser = self._parser
        if run.start == run.end and run.end != len(data):
            run.tree = None  # an emptied run: nothing to parse, and it is dropped
            return
        if run.start == 0 and run.end == len(data):
            parser.included_ranges = []
        else:
            parser.included_ranges = [
                Range(index.byte_to_point(run.start), index.byte_to_point(run.end),
                      run.start, run.end)
            ]  # fmt: skip
        try:
            run.tree = parser.parse(data, run.tree) if run.tree is not None else parser.parse(data)
        finally:
            parser.included_ranges = []

    def _parse_runs(self, data: bytes, index: LineIndex, runs: list[Run]) -> None:
        for run in runs:
            if run.tree is None:
                self._parse(data, index, run)

    @staticmethod
    def _moved(run: Run, edit: Edit, delta: int) -> Run:
        """`run` shifted past an edit before it; its tree is a moved copy, still to re-read."""
        moved = Run(run.start + delta, run.end + delta)
        if run.tree is not None:
            moved.tree = edit.applied(run.tree)
        return moved

    def _split_touched(self, edit: Edit) -> None:
        """Cut runs the edit touches that are large and error-free into runs of target size;
        the new runs are parsed when the edit is applied."""
        runs = self._runs
        total = runs[-1].end
        target = self._run_bytes or run_bytes_for(total)
        starts = [r.start for r in runs]
        lo = max(0, bisect_right(starts, edit.start) - 2)
        hi = bisect_right(starts, edit.old_end)
        out: list[Run] = [*runs[:lo]]
        changed = False
        for run in runs[lo:hi]:
            tree = run.tree
            if tree is None or run.end - run.start <= 2 * target or tree.root_node.has_error:
                out.append(run)
                continue
            cuts = _cut_points(tree.root_node, run.start, target)
            if not cuts:
                out.append(run)
                continue
            changed = True
            bounds = [run.start, *cuts, run.end]
            out.extend(Run(a, b) for a, b in pairwise(bounds))
        if changed:
            self._runs = [*out, *runs[hi:]]


def _cut_points(root: Node, start: int, target: int) -> list[int]:
    """Byte offsets of top-level statements in column 0 that start a new run."""
    cuts: list[int] = []
    last = start
    prev_end_row = -1
    for child in root.children:
        row, col = child.start_point
        if (
            col == 0
            and row > prev_end_row
            and child.type != "comment"
            and child.start_byte - last >= target
        ):
            cuts.append(child.start_byte)
            last = child.start_byte
        prev_end_row = child.end_point[0]
    return cuts


def _has_error(run: Run) -> bool:
    return run.tree is not None and run.tree.root_node.has_error


def _runs_on(region: Run, data: bytes) -> bool:
    """Whether the region's last line ends in a backslash, continuing into the next run."""
    return data[region.start : region.end].rstrip(b" \t\r\n\f").endswith(b"\\")
