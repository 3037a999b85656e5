"""Nothing the user types crashes the analysis, and incremental results equal fresh ones."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stitch_lsp.analysis import Document, analyze, symbol_at
from stitch_lsp.analysis.cuda_facts import SOURCES as CUDA_CACHE
from stitch_lsp.analysis.cuda_facts import extract, facts_of_source
from stitch_lsp.analysis.grammars import parser
from stitch_lsp.analysis.text_index import utf16_len

from .conftest import DATA, REPO

SOURCES = [
    (REPO / "examples" / "relu_bias_inline.py").read_text(),
    (DATA / "bad_pure_pytorch.py").read_text(),
    (DATA / "honest_conv_tail.py").read_text(),
]
CUDA = (DATA / "bad_kernels.cu").read_text()


def _position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n"), utf16_len(before[before.rfind("\n") + 1 :])


def _summary(doc: Document) -> tuple:
    result = analyze(doc)
    return (
        [
            (d.line, d.column, d.end_line, d.end_column, d.code, d.message)
            for d in result.diagnostics
        ],
        [(k.name, k.range) for k in result.kernels],
        [(m.name, m.range) for m in result.modules],
        [e.text for e in result.embedded],
    )


_SNIPPETS = st.sampled_from(
    ["", " ", "\n", "(", ")", '"""', "'", "#", "é", "x = 1\n", "<<<1, 100>>>", "__global__", "\\n"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(SOURCES) - 1),
    edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 30), _SNIPPETS), max_size=5),
)
def test_incremental_analysis_equals_fresh(which: int, edits: list[tuple[float, int, str]]) -> None:
    text = SOURCES[which]
    doc = Document("file:///tmp/fuzz.py", text, "python")
    analyze(doc)
    for frac, length, new in edits:
        start = int(frac * len(text))
        end = min(start + length, len(text))
        doc.apply_change((*_position(text, start), *_position(text, end)), new)
        text = text[:start] + new + text[end:]
        analyze(doc)  # every intermediate version is analysed, as in the editor
    incremental = _summary(doc)
    CUDA_CACHE.clear()  # the fresh document parses its CUDA strings from scratch
    fresh = Document("file:///tmp/fuzz.py", text, "python")
    assert incremental == _summary(fresh)
    result = analyze(doc)
    for line in range(0, text.count("\n") + 1, 7):
        symbol_at(result, line, 4)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=400), lang=st.sampled_from(["python", "cuda-cpp"]))
def test_arbitrary_bytes_never_crash(data: bytes, lang: str) -> None:
    doc = Document("file:///tmp/junk", data.decode("utf-8", "replace"), lang)
    result = analyze(doc)
    assert len([d for d in result.diagnostics if d.code == "stitch.parse-error"]) <= 1
    _ = result.symbols, result.kernels, result.launches


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(0, len(CUDA)))
def test_truncated_cuda_never_crashes(cut: int) -> None:
    result = analyze(Document("file:///tmp/k.cu", CUDA[:cut], "cuda-cpp"))
    _ = result.symbols


@settings(max_examples=60, deadline=None)
@given(
    cut=st.integers(0, len(CUDA)),
    length=st.integers(0, 20),
    new=st.sampled_from(["", " ", "x", "\n", "}", "<<<1, 64>>>", "__global__ void z() {}\n"]),
)
def test_incremental_cuda_string_parse_equals_fresh(cut: int, length: int, new: str) -> None:
    old = CUDA.encode()
    data = old[:cut] + new.encode() + old[cut + length :]
    facts_of_source(old)
    incremental = facts_of_source(data, previous=old)
    fresh = extract(parser("cuda").parse(data).root_node, data)
    assert incremental == fresh


def test_analyses_leave_no_cyclic_garbage() -> None:
    """Replaced analyses must be freed by reference counting: cycles make the garbage
    collector run in the middle of keystrokes (tens of milliseconds in a large server)."""
    import gc

    text = SOURCES[0]
    gc.collect()
    gc.disable()
    try:
        doc = Document("file:///tmp/gc.py", text, "python")
        for i in range(3):
            doc.apply_change((1, 0, 1, 0), "#")
            result = analyze(doc)
            if i % 2:
                _ = result.symbols, result.kernels
        cu = analyze(Document("file:///tmp/gc.cu", CUDA, "cuda-cpp"))
        _ = cu.symbols
        del doc, result, cu, _
        assert gc.collect() == 0
    finally:
        gc.enable()
