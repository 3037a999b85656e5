"""The statement forest equals a whole-file parse, node for node, after any edit."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tree_sitter import Node

from stitch_lsp.analysis import Document, grammars
from stitch_lsp.analysis.forest import Edit, StatementForest
from stitch_lsp.analysis.text_index import LineIndex

STATEMENTS = [
    "import torch\n",
    "x = 1\n",
    "y = (1 +\n     2)\n",
    "s = '''a\nb'''\n",
    "t = 1 + \\\n    2\n",
    "# a comment\n",
    "\n",
    "def f(a):\n    return a\n",
    "class A:\n    def g(self):\n        pass\n",
    "@dec\ndef h():\n    pass\n",
    "if x:\n    pass\nelse:\n    y = 2\n",
    "try:\n    pass\nexcept E:\n    pass\n",
    "for i in r:\n    x += i\n",
    "a = 1; b = 2\n",
    'cuda = r"""\n__global__ void k() {}\n"""\n',
    "doc = '''\ndef q():\nclass Z:\n'''\n",
    "while x:\n    pass\nelse:\n    pass\n",
    "match x:\n    case 1:\n        pass\n",
    "async def co():\n    await x\n",
    "with open(p) as fh:\n    pass\n",
    "print 'py2'\n",
    "@d\nclass D:\n    '''doc'''\n",
]
PIECES = st.sampled_from(
    [*"ab ():\n\t'\"#=\\,", "    ", "else:", "elif x:", "except:", "@d\n", '"""', "def ", "class "]
)


def signature(roots: list[Node]) -> list[tuple]:
    """Every node below the roots: type, byte span, point span, missing flag."""
    out: list[tuple] = []
    for root in roots:
        stack = list(reversed(root.children))
        while stack:
            n = stack.pop()
            out.append((n.type, n.start_byte, n.end_byte, n.start_point, n.end_point, n.is_missing))
            stack.extend(reversed(n.children))
    return out


def whole_file(data: bytes) -> list[tuple]:
    return signature([grammars.parser("python").parse(data).root_node])


def apply(forest: StatementForest, data: bytes, start: int, end: int, new: bytes) -> bytes:
    old = LineIndex(data)
    after = data[:start] + new + data[end:]
    nl = new.count(b"\n")
    sp, ep = old.byte_to_point(start), old.byte_to_point(end)
    new_end = (sp[0] + nl, len(new) - new.rfind(b"\n") - 1) if nl else (sp[0], sp[1] + len(new))
    forest.edit(Edit(start, end, start + len(new), sp, ep, new_end), after, LineIndex(after))
    return after


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    statements=st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=14),
    run_bytes=st.integers(1, 40),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 8), st.lists(PIECES, max_size=4)),
        min_size=1,
        max_size=8,
    ),
)
def test_forest_equals_whole_file_parse(
    statements: list[str], run_bytes: int, edits: list[tuple[float, int, list[str]]]
) -> None:
    data = "".join(statements).encode()
    forest = StatementForest(grammars.parser("python"), data, LineIndex(data), run_bytes)
    for where, length, pieces in edits:
        start = int(where * len(data))
        data = apply(forest, data, start, min(len(data), start + length), "".join(pieces).encode())
        assert signature(forest.roots) == whole_file(data)
        assert (
            any(r.has_error for r in forest.roots)
            == grammars.parser("python").parse(data).root_node.has_error
        )


def test_an_edit_reparses_only_its_run() -> None:
    """After the first edit has cut the file into runs, runs away from the edit keep their
    trees (same root node ids before the edit), and only a few runs are re-read."""
    data = "".join(f"def f{i}(a):\n    return a + {i}\n\n" for i in range(400)).encode()
    forest = StatementForest(grammars.parser("python"), data, LineIndex(data), 256)
    data = apply(forest, data, data.index(b"+ 7"), data.index(b"+ 7") + 1, b"-")
    assert forest.run_count > 40
    ids = [r.id for r in forest.roots]
    at = data.index(b"+ 300")
    data = apply(forest, data, at, at + 1, b"*")  # same length: no run after it moves
    after = [r.id for r in forest.roots]
    assert sum(a != b for a, b in zip(ids, after, strict=True)) <= 2
    assert signature(forest.roots) == whole_file(data)


def test_indenting_a_statement_joins_it_to_the_previous_run() -> None:
    data = b"class A:\n    x = 1\n\ndef f():\n    pass\n"
    forest = StatementForest(grammars.parser("python"), data, LineIndex(data), 1)
    data = apply(forest, data, 0, 0, b"")  # cut into runs
    data = apply(forest, data, data.index(b"def"), data.index(b"def"), b"    ")
    assert signature(forest.roots) == whole_file(data)
    cls = forest.roots[0].children[0]
    assert cls.type == "class_definition" and b"def f" in (cls.text or b"")


def test_an_unclosed_bracket_is_parsed_to_the_end_of_the_file() -> None:
    data = b"x = 1\n\ny = 2\n\nz = 3\n"
    forest = StatementForest(grammars.parser("python"), data, LineIndex(data), 1)
    data = apply(forest, data, 0, 0, b"")
    data = apply(forest, data, data.index(b"1"), data.index(b"1") + 1, b"(1")
    assert signature(forest.roots) == whole_file(data)
    assert forest.roots[-1].has_error


def test_document_roots_after_edits_match_a_fresh_document() -> None:
    block = "class M{i}:\n    def forward(self, x):\n        return x * {i}\n\n"
    src = "".join(block.format(i=i) for i in range(300))
    doc = Document("file:///big.py", src, "python")
    assert len(doc.roots) == 1  # parsed whole on open
    for k in range(5):
        line = 2 + 4 * (k * 60)
        doc.apply_change((line, 23, line, 23), f" + {k}")
    assert len(doc.roots) > 1
    fresh = Document("file:///big.py", doc.text, "python")
    assert signature(doc.roots) == signature(fresh.roots)


def test_analysis_of_a_split_document_equals_a_fresh_one() -> None:
    """Findings, modules and kernels are the same whether the text came by edits or whole."""
    import random

    from stitch_lsp.analysis import analyze

    head = (Path(__file__).parents[1] / "server" / "data" / "cheat.py").read_text()
    block = "class M{i}(nn.Module):\n    def forward(self, x):\n        return x * {i}\n\n"
    cuda = (
        'src = r"""\n__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n'
        'torch::Tensor run(torch::Tensor y) { k<<<1, 30>>>(y.data_ptr<float>()); return y; }\n"""\n'
        'ext = load_inline(name="e", cpp_sources="", cuda_sources=src, functions=["run"])\n\n'
    )
    text = (
        head
        + "from torch.utils.cpp_extension import load_inline\n\n"
        + "".join(block.format(i=i) for i in range(150))
        + cuda
        + "".join(block.format(i=i) for i in range(150, 300))
    )
    doc = Document("file:///split.py", text, "python")
    rng = random.Random(7)
    for k in range(40):
        lines = doc.text.split("\n")
        row = rng.randrange(len(lines))
        line = lines[row]
        kind = k % 4
        if kind == 0:  # a blank line typed above this one
            doc.apply_change((row, 0, row, 0), "\n")
        elif kind == 1:  # a comment typed at the end of the line
            doc.apply_change((row, len(line), row, len(line)), "  # c")
        elif kind == 2 and any(ch.isdigit() for ch in line):  # a digit typed over
            col = max(i for i, ch in enumerate(line) if ch.isdigit())
            doc.apply_change((row, col, row, col + 1), str((int(line[col]) + 1) % 10))
        elif not line.strip() and row + 1 < len(lines):  # a blank line deleted
            doc.apply_change((row, 0, row + 1, 0), "")
        assert not doc.has_error
        if k % 8 == 7:
            assert doc.tree_count > 1
            fresh = Document("file:///split.py", doc.text, "python")
            got, want = analyze(doc), analyze(fresh)
            assert {"side-stream", "torch-op", "block-size"} <= {
                d.code.removeprefix("stitch.") for d in want.diagnostics
            }
            assert [d.model_dump() for d in got.diagnostics] == [
                d.model_dump() for d in want.diagnostics
            ]
            assert [m.name for m in got.modules] == [m.name for m in want.modules]
            assert [(s.name, s.range) for s in got.symbols] == [
                (s.name, s.range) for s in want.symbols
            ]


class CountingParser:
    """A parser that counts its parses (the forest only calls `parse` and sets ranges)."""

    def __init__(self) -> None:
        self.inner = grammars.parser("python")
        self.parses = 0

    @property
    def included_ranges(self) -> list:
        return self.inner.included_ranges

    @included_ranges.setter
    def included_ranges(self, ranges: list) -> None:
        self.inner.included_ranges = ranges

    def parse(self, *args: object) -> object:
        self.parses += 1
        return self.inner.parse(*args)


def test_a_broken_file_is_parsed_once_per_read_not_per_keystroke() -> None:
    data = b"x = (1,\n" + b"".join(b"def f%d():\n    return %d\n\n" % (i, i) for i in range(50))
    parser = CountingParser()
    forest = StatementForest(parser, data, LineIndex(data), 64)  # type: ignore[arg-type]
    assert forest.roots[0].has_error
    before = parser.parses
    for _ in range(5):  # five keystrokes at the end of the file, no read in between
        data = apply(forest, data, len(data), len(data), b"#")
    assert parser.parses == before
    assert signature(forest.roots) == whole_file(data)
    assert parser.parses == before + 1
    # Closing the bracket: the next read parses a clean file, and edits then split it.
    at = data.index(b"1,") + 2
    data = apply(forest, data, at, at, b")")
    assert not any(r.has_error for r in forest.roots)
    data = apply(forest, data, len(data), len(data), b"\n")
    assert forest.run_count > 1 and signature(forest.roots) == whole_file(data)
