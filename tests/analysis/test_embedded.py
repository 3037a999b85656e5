"""CUDA strings in Python: decoding and the virtual <-> document position mapper."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stitch_lsp.analysis import Document, analyze

from .conftest import run


def _embedded(source: str):
    result = run(source)
    assert result.embedded, result.load_inline_calls
    return result, result.embedded[0]


def test_raw_triple_quoted_string_maps_lines() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        'cuda_src = r"""\n'
        "__global__ void k(float* x) {\n"
        "  x[0] = 1.0f; // \\n stays two characters in a raw string\n"
        "}\n"
        '"""\n'
        "ext = load_inline(name='e', cpp_sources='', cuda_sources=cuda_src)\n"
    )
    result, emb = _embedded(src)
    assert emb.name == "cuda_src" and emb.role == "cuda_sources"
    assert emb.text.startswith("\n__global__ void k")
    assert "\\n stays" in emb.text
    # virtual line 1 is document line 2
    assert emb.to_document(1, 0) == (2, 0)
    assert emb.to_virtual(2, 11) == (1, 11)
    kernel = result.kernels[0]
    assert kernel.name == "k" and kernel.selection_range[:2] == (2, 16)
    assert result.load_inline_calls[0].embedded == [result.embedded.index(emb)]


def test_escapes_in_plain_string() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        'SRC = "__global__ void k() {}\\n__global__ void q(int\\tn) {}\\n"\n'
        "m = load_inline('m', '', cuda_sources=[SRC])\n"
    )
    result, emb = _embedded(src)
    assert emb.text == "__global__ void k() {}\n__global__ void q(int\tn) {}\n"
    q = next(k for k in result.kernels if k.name == "q")
    # `q` is on virtual line 1 but document line 1 (the same line as `k`).
    line = src.splitlines()[1]
    assert q.selection_range[:2] == (1, line.index(" q(") + 1)
    # The `\t` escape maps as a whole.
    tab = line.index("\\t")
    assert emb.to_virtual(1, tab) == emb.to_virtual(1, tab + 1)


def test_adjacent_literals_and_plus() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "HEAD = '#include <cuda.h>\\n'\n"
        "BODY = ('__global__ void a() {}\\n'\n"
        "        '__global__ void b() {}\\n')\n"
        "m = load_inline('m', '', cuda_sources=HEAD + BODY)\n"
    )
    result, emb = _embedded(src)
    assert emb.text == "#include <cuda.h>\n__global__ void a() {}\n__global__ void b() {}\n"
    b = next(k for k in result.kernels if k.name == "b")
    assert b.selection_range[0] == 3


def test_list_joined_with_newlines() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "A = '__global__ void a() {}'\n"
        "B = '__global__ void b() {}'\n"
        "m = load_inline('m', '', cuda_sources=[A, B])\n"
    )
    _, emb = _embedded(src)
    assert emb.text == "__global__ void a() {}\n__global__ void b() {}"
    assert emb.name is None
    assert emb.to_document(1, 0) == (2, 5)


def test_dynamic_strings_are_declined() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "N = 4\n"
        "F = f'__global__ void k() {{ int a[{N}]; }}'\n"
        "G = '__global__ void k() {{ %d }}' % N\n"
        "H = '__global__ void k() {}'.format()\n"
        "m1 = load_inline('m1', '', cuda_sources=F)\n"
        "m2 = load_inline('m2', '', cuda_sources=G)\n"
        "m3 = load_inline('m3', '', cuda_sources=H)\n"
        "m4 = load_inline('m4', '', cuda_sources='x' + N)\n"
    )
    result = run(src)
    assert result.embedded == []
    declined = [c.declined for c in result.load_inline_calls]
    assert all(len(d) == 1 and d[0].startswith("cuda_sources:") for d in declined), declined
    assert "f-string" in declined[0][0]
    assert not codes_of(result)


def codes_of(result):
    return [d for d in result.diagnostics if d.severity.value in ("error", "warning")]


def test_load_cuda_and_unused_module_string() -> None:
    src = (
        "from stitch_lsp.runtime import load_cuda\n"
        'SRC = r"""\n'
        "__global__ void k(float* y) { y[0] = 0; }\n"
        'extern "C" int launch(float* y, cudaStream_t s) {\n'
        "  k<<<1, 32, 0, s>>>(y);\n"
        "  return (int)cudaGetLastError();\n"
        "}\n"
        '"""\n'
        "lib = load_cuda(SRC, name='k')\n"
        'OTHER = "__global__ void lonely() {}"\n'
    )
    result = run(src)
    roles = sorted(e.role for e in result.embedded)
    assert roles == ["load_cuda", "string"]
    assert result.load_inline_calls[0].kind == "load_cuda"
    assert result.load_inline_calls[0].target == "lib"
    assert {k.name for k in result.kernels} == {"k", "lonely"}
    # A string no loader uses is not checked for unused kernels.
    assert not [d for d in result.diagnostics if d.code == "stitch.kernel-unused"]


_PIECES = st.sampled_from(
    ["a", "b", " ", "x", "é", "😀", "\\n", "\\t", "\\\\", "\\x41", "\\u00e9", "\\'", "\n", "{", ";"]
)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(_PIECES, min_size=1, max_size=30),
    raw=st.booleans(),
    indent=st.integers(0, 6),
)
def test_mapper_roundtrip(pieces: list[str], raw: bool, indent: int) -> None:
    body = "//" + "".join(pieces)
    if raw:
        body = body.replace("\\'", "q")
    prefix = "r" if raw else ""
    lead = f"{'y' * indent} = 0; " if indent else ""
    src = f"x = 1\n{lead}SRC = {prefix}'''{body}'''\nlib = load_cuda(SRC, name='n')\n"
    doc = Document("file:///r.py", src, "python")
    result = analyze(doc)
    assert len(result.embedded) == 1
    emb = result.embedded[0]
    expected = eval(f"{prefix}'''{body}'''")  # the value Python itself builds
    assert emb.text == expected
    # virtual -> document -> virtual is the identity on every character start.
    vtext = emb.text
    line, col = 0, 0
    for ch in vtext:
        d = emb.to_document(line, col)
        assert emb.to_virtual(*d) == (line, col), (line, col, d)
        if ch == "\n":
            line, col = line + 1, 0
        else:
            col += 2 if ord(ch) > 0xFFFF else 1
