"""Go to definition and find references between Python calls and the CUDA in their strings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from stitch_lsp.analysis import Document, analyze
from stitch_lsp.config import Settings
from stitch_lsp.server.features.navigation import Navigator
from tests.server.lsp_client import StitchClient, _plain, initialize, open_file

INLINE = '''import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void scale_kernel(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}

// scale(x, s): launches scale_kernel
torch::Tensor scale(torch::Tensor x, double s) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), s, n);
  return y;
}
"""
cpp_src = "torch::Tensor scale(torch::Tensor x, double s);"
ext = load_inline(name="scale_ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["scale"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        # ext.scale(x) in a comment is not a call
        return ext.scale(x, 2.0)
'''


def where(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """0-based (line, column) of the first `needle`, moved right by `offset`."""
    for n, line in enumerate(text.splitlines()):
        if needle in line and not line.lstrip().startswith(("#", "//")):
            return n, line.index(needle) + offset
    raise AssertionError(needle)


def nav(text: str) -> Navigator:
    a = analyze(Document("file:///tmp/m.py", text, "python"), Settings())
    return Navigator(text, a, False)


def test_a_load_inline_call_goes_to_the_kernel_its_function_launches() -> None:
    n = nav(INLINE)
    kernel = where(INLINE, "scale_kernel(")
    line, col = where(INLINE, "ext.scale(", 5)
    assert [r[:2] for r in n.definition(line, col)] == [kernel]


def test_a_launch_goes_to_its_global() -> None:
    n = nav(INLINE)
    kernel = where(INLINE, "scale_kernel(")
    line, col = where(INLINE, "scale_kernel<<<", 2)
    assert [r[:2] for r in n.definition(line, col)] == [kernel]


def test_references_of_a_kernel_are_its_launch_and_the_python_call() -> None:
    n = nav(INLINE)
    line, col = where(INLINE, "scale_kernel(", 1)
    found = [r[:2] for r in n.references(line, col, include_declaration=False)]
    assert found == [where(INLINE, "scale_kernel<<<"), where(INLINE, "ext.scale(", 4)]
    with_decl = n.references(line, col, include_declaration=True)
    assert with_decl[0][:2] == (line, col - 1)


def test_python_names_that_are_not_cuda_calls_have_no_definition_here() -> None:
    n = nav(INLINE)
    assert n.definition(*where(INLINE, "torch.nn.Module", 7)) == []
    assert n.definition(*where(INLINE, "def forward", 5)) == []


def test_a_generated_launcher_call_goes_to_its_templated_kernel() -> None:
    text = (
        "# stitch-lsp: reference=ref.py\nfrom stitch_lsp.runtime import load_cuda\n"
        'SRC = r"""\ntemplate <bool VEC>\n__global__ void k_kernel(float* o) { o[0] = 1.f; }\n'
        'extern "C" int k(float* o, cudaStream_t s) {\n'
        '  k_kernel<true><<<1, 32, 0, s>>>(o);\n  return 0;\n}\n"""\n'
        'lib = load_cuda(SRC, name="k")\n\n\ndef run(o):\n    return lib.k(o.data_ptr(), 0)\n'
    )
    n = nav(text)
    kernel = where(text, "k_kernel(")
    assert [r[:2] for r in n.definition(*where(text, "lib.k(", 4))] == [kernel]
    refs = [r[:2] for r in n.references(*where(text, "k_kernel(", 1), include_declaration=False)]
    assert refs == [where(text, "k_kernel<true>"), where(text, "lib.k(", 4)]


async def test_definition_and_references_through_the_server(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    (tmp_path / "ref.py").write_text("class Model: ...\n")
    text = "# stitch-lsp: reference=ref.py\n" + INLINE
    uri = await open_file(client, tmp_path / "m_stitch.py", text)

    def position(needle: str, offset: int) -> lsp.Position:
        line, col = where(text, needle, offset)
        return lsp.Position(line=line, character=col)

    found: Any = _plain(
        await client.text_document_definition_async(
            lsp.DefinitionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=position("ext.scale(", 6),
            )
        )
    )
    kernel_line, kernel_col = where(text, "scale_kernel(")
    assert [(d["uri"], d["range"]["start"]) for d in found] == [
        (uri, {"line": kernel_line, "character": kernel_col})
    ]
    refs: Any = _plain(
        await client.text_document_references_async(
            lsp.ReferenceParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=position("scale_kernel(", 3),
                context=lsp.ReferenceContext(include_declaration=True),
            )
        )
    )
    assert [r["range"]["start"]["line"] for r in refs] == [
        kernel_line,
        where(text, "scale_kernel<<<")[0],
        where(text, "ext.scale(")[0],
    ]
    # The header goes to the reference file.
    header: Any = _plain(
        await client.text_document_definition_async(
            lsp.DefinitionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=0, character=28),
            )
        )
    )
    assert [d["uri"] for d in header] == [(tmp_path / "ref.py").as_uri()]
