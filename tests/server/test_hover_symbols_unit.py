"""Static hover text and the outline conversion, in-process (no server)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from stitch_lsp.analysis import Document, analyze
from stitch_lsp.server.hover import hover_markdown
from stitch_lsp.server.symbols import to_document_symbols

DATA = Path(__file__).parent / "data"


def test_launch_hover_shows_its_config_and_the_kernel() -> None:
    a = analyze(Document.from_path(DATA / "saxpy_unchecked.cu"))
    text = hover_markdown(a, 10, 6)  # on `saxpy` in saxpy<<<...>>>
    assert text is not None
    assert text.startswith("**launch of `saxpy`**")
    assert "block `100`" in text and "stream `s`" in text
    assert "no launch error check follows" in text
    assert "__global__ void saxpy(int n, float a, const float* x, float* y)" in text
    assert text.count("line 11") == 1  # the kernel part does not repeat the launch


def test_unlaunched_kernel_hover_says_so() -> None:
    a = analyze(Document.from_path(DATA / "saxpy_unchecked.cu"))
    text = hover_markdown(a, 7, 18)  # never_used
    assert text is not None and "Launch sites: none found in this file." in text


def test_module_hover_names_the_reference_header() -> None:
    a = analyze(Document.from_path(DATA / "candidate_half.py"))
    line = next(i for i, s in enumerate((DATA / "candidate_half.py").read_text().split("\n"))
                if s.startswith("class ModelNew"))  # fmt: skip
    text = hover_markdown(a, line, 8)
    assert text is not None
    assert "class `ModelNew`" in text and "candidate" in text
    assert "Reference: `ref.py`" in text
    assert "`relu_half`" in text and "`relu_kernel`" in text


def test_outline_is_hierarchical_and_valid_lsp() -> None:
    a = analyze(Document.from_path(DATA / "inline_kernel.py"))
    symbols = to_document_symbols(a.symbols)

    def check(s: lsp.DocumentSymbol) -> None:
        r, sel = s.range, s.selection_range
        assert (r.start.line, r.start.character) <= (sel.start.line, sel.start.character)
        assert (sel.end.line, sel.end.character) <= (r.end.line, r.end.character)
        for c in s.children or []:
            check(c)

    for s in symbols:
        check(s)
    names = [s.name for s in symbols]
    assert "scale_kernel" in names and "ModelNew" in names
