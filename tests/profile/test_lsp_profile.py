"""End to end through the real server: `stitch.showProfile` puts a real report's findings on the
right lines of a `.cu` file and of a Python file holding the CUDA in a string; edits hide them,
undo brings them back; hover and code lens summarise the kernel. No GPU needed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("pytest_lsp")

import pytest_lsp
from lsprotocol import types as lsp

from tests.server.lsp_client import (
    StitchClient,
    _plain,
    edit,
    initialize,
    open_file,
    wait_for_diagnostics,
    wait_until,
)
from tests.server.profiler_tools import SERVER_WITH_PROFILER

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

PY_MODEL = '''import torch
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void relu_bias(const float* x, const float* b, float* y, int n, int c){
  int i = blockIdx.x*blockDim.x+threadIdx.x;
  if(i<n){ float v = x[i] + b[i % c]; y[i] = v>0.f? v:0.f; }
}
torch::Tensor fused(torch::Tensor x, torch::Tensor b){
  auto y = torch::empty_like(x); int n = x.numel(); int c = b.numel();
  relu_bias<<<(n+255)/256,256>>>(
    x.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n, c);
  return y;
}
"""
'''
PY_KERNEL_LINE = 6  # 1-based: `__global__ void relu_bias(` in PY_MODEL
PY_BODY_LINE = 8  # `if(i<n){ ... }`: the report's cuda.cu line 8 (load_inline adds 3 lines)


def ncu_lines(diags: list[lsp.Diagnostic]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for d in diags:
        if d.source == "ncu":
            out.setdefault(d.range.start.line + 1, set()).add(str(d.code))
    return out


async def show(client: StitchClient, uri: str, report: Path, **extra) -> dict:
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            command="stitch.showProfile", arguments=[{"uri": uri, "report": str(report), **extra}]
        )
    )
    return _plain(result)


@pytest.fixture
def report(ncu_fixture_dir: Path) -> Path:
    return ncu_fixture_dir / "relu_bias_full.ncu-rep"


async def test_python_string_lines(client: StitchClient, tmp_path: Path, report: Path) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "model.py", PY_MODEL)
    await wait_for_diagnostics(client, uri, version=1)
    result = await show(client, uri, report)
    assert result["ok"] and uri in result["documents"], result
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)
    lines = ncu_lines(client.diagnostics[uri])
    # Rule results sit on the kernel's signature, markers and hot spots on the body line.
    assert {"SOLBottleneck", "AchievedOccupancy", "CPIStall"} <= lines[PY_KERNEL_LINE]
    assert {"CPIStall", "FPInstructions", "SourceCounters"} <= lines[PY_BODY_LINE]
    assert set(lines) == {PY_KERNEL_LINE, PY_BODY_LINE}
    d = next(d for d in client.diagnostics[uri] if d.code == "CPIStall" and d.range.start.line == 7)
    assert d.severity == lsp.DiagnosticSeverity.Warning  # est. speedup 49% >= 10%
    assert d.code_description and d.code_description.href.startswith(
        "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#"
    )
    assert result["kernels"][0]["name"] == "relu_bias"
    assert result["kernels"][0]["line"] == PY_KERNEL_LINE


async def test_cu_file_lines_and_map(client: StitchClient, tmp_path: Path, report: Path) -> None:
    """A .cu file elsewhere: the report's path does not exist here; --map-style mapping."""
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    body = PY_MODEL.split('r"""\n', 1)[1].split('"""')[0]
    cu_text = "// relu with a bias, as a standalone file\n" + body
    uri = await open_file(client, tmp_path / "kernels" / "relu_bias.cu", cu_text)
    await wait_for_diagnostics(client, uri, version=1)
    result = await show(
        client, uri, report, map={"cuda.cu": str(tmp_path / "kernels/relu_bias.cu")}
    )
    assert result["ok"], result
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)
    lines = ncu_lines(client.diagnostics[uri])
    sig = (
        cu_text.splitlines().index(next(ln for ln in cu_text.splitlines() if "__global__" in ln))
        + 1
    )
    body_line = next(i for i, ln in enumerate(cu_text.splitlines(), 1) if "if(i<n)" in ln)
    assert "SOLBottleneck" in lines[sig]
    assert {"CPIStall", "FPInstructions"} <= lines[body_line]


async def test_edit_hides_and_undo_restores(
    client: StitchClient, tmp_path: Path, report: Path
) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "model.py", PY_MODEL)
    await wait_for_diagnostics(client, uri, version=1)
    await show(client, uri, report)
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)

    edit(client, uri, 2, (0, 0), (0, 0), "# edited\n")
    diags = await wait_for_diagnostics(client, uri, version=2)
    assert not ncu_lines(diags), "findings of an older version must not stay on moved lines"
    lenses = _plain(await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    ))  # fmt: skip
    assert any("stale" in (x["command"]["title"]) for x in lenses)

    edit(client, uri, 3, (0, 0), (1, 0), "")  # back to the profiled text
    diags = await wait_for_diagnostics(client, uri, version=3)
    assert PY_BODY_LINE in ncu_lines(diags)


async def test_hover_and_code_lens(client: StitchClient, tmp_path: Path, report: Path) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "model.py", PY_MODEL)
    await wait_for_diagnostics(client, uri, version=1)
    await show(client, uri, report)
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)

    col = PY_MODEL.splitlines()[PY_KERNEL_LINE - 1].index("relu_bias") + 2
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=PY_KERNEL_LINE - 1, character=col),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "ncu" in text and "56.26 µs" in text and "Bottleneck: latency" in text
    assert "Occupancy 75% achieved of 100% theoretical" in text and "Hints" in text
    launch_line = next(i for i, ln in enumerate(PY_MODEL.splitlines()) if "relu_bias<<<" in ln)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=launch_line, character=4),
        )
    )
    assert hover is not None and "Bottleneck: latency" in hover.contents.value  # type: ignore[union-attr]

    lenses = _plain(await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    ))  # fmt: skip
    titles = {x["range"]["start"]["line"]: x["command"]["title"] for x in lenses}
    assert titles[PY_KERNEL_LINE - 1].startswith("ncu: 56.3 µs · latency-bound")


async def test_profile_without_gpu_says_so(client: StitchClient, tmp_path: Path) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "model.py", PY_MODEL)
    await wait_for_diagnostics(client, uri, version=1)
    result = _plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="stitch.profile", arguments=[uri])
        )
    )
    if result.get("ok"):
        pytest.skip("this machine has a GPU and ncu")
    assert "GPU" in result["message"] or "ncu" in result["message"], result


REPO = Path(__file__).resolve().parents[2]
OWN_FIXTURES = REPO / "tests" / "fixtures" / "ncu"


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


async def test_example_cu_with_its_report(client: StitchClient, tmp_path: Path) -> None:
    text = (REPO / "examples/kernels/profile_uncoalesced.cu").read_text()
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "profile_uncoalesced.cu", text)
    await wait_for_diagnostics(client, uri, version=1)
    result = await show(client, uri, OWN_FIXTURES / "profile_uncoalesced.ncu-rep")
    assert result["ok"] and result["unmapped"] == [], result
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)
    lines = ncu_lines(client.diagnostics[uri])
    assert "UncoalescedGlobalAccess" in lines[_line(text, "out[x * rows + y]")]
    assert "SOLBottleneck" in lines[_line(text, "__global__ void transpose_naive")]


async def test_example_py_with_its_report(client: StitchClient, tmp_path: Path) -> None:
    text = (REPO / "examples/kernels/profile_inline_transpose.py").read_text()
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "profile_inline_transpose.py", text)
    await wait_for_diagnostics(client, uri, version=1)
    result = await show(client, uri, OWN_FIXTURES / "profile_inline_transpose.ncu-rep")
    assert result["ok"], result
    await wait_until(lambda: ncu_lines(client.diagnostics.get(uri, [])), 10)
    lines = ncu_lines(client.diagnostics[uri])
    assert "UncoalescedGlobalAccess" in lines[_line(text, "out[x * rows + y]")]

    row = _line(text, "class ModelNew") - 1
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=row, character=len("class Mo")),
        )
    )
    assert hover is not None
    md = hover.contents.value  # type: ignore[union-attr]
    assert "1 kernel(s)" in md and "transpose_inline" in md and "Bottleneck: memory" in md
    lenses = _plain(await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    ))  # fmt: skip
    titles: dict[int, list[str]] = {}
    for x in lenses:
        titles.setdefault(x["range"]["start"]["line"], []).append(x["command"]["title"])
    assert any(t.startswith("ncu: 1 kernel(s)") for t in titles[row])
    sig = _line(text, "__global__ void transpose_inline") - 1
    assert any("memory-bound" in t for t in titles[sig])


@pytest_lsp.fixture(config=SERVER_WITH_PROFILER)
async def profiler_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


async def test_profile_offered_before_any_profile(
    profiler_client: StitchClient, tmp_path: Path
) -> None:
    """A lens and code actions run stitch.profile where the profiler can run the file (a GPU
    and ncu here: stand-ins; tests/server/test_profile_offer.py has the machines without)."""
    client = profiler_client
    text = (REPO / "examples/kernels/profile_inline_transpose.py").read_text()
    cu_text = (REPO / "examples/kernels/profile_uncoalesced.cu").read_text()
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(client, tmp_path / "t.py", text)
    cu_uri = await open_file(client, tmp_path / "t.cu", cu_text)
    no_main = await open_file(client, tmp_path / "lib.cu", "__global__ void k(float* x) {}\n")
    for u in (uri, cu_uri, no_main):
        await wait_for_diagnostics(client, u, version=1)

    async def profile_lenses(u: str) -> list[tuple[int, list]]:
        lenses = _plain(await client.text_document_code_lens_async(
            lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=u))
        ))  # fmt: skip
        return [
            (x["range"]["start"]["line"], x["command"]["arguments"])
            for x in lenses
            if x["command"]["command"] == "stitch.profile"
        ]

    assert await profile_lenses(uri) == [(_line(text, "class ModelNew") - 1, [uri])]
    assert await profile_lenses(cu_uri) == [(_line(cu_text, "void transpose_naive") - 1, [cu_uri])]
    assert await profile_lenses(no_main) == []
    actions = (await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0)
            ),
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    ))  # fmt: skip
    # lsprotocol's client-side hook reads every CodeAction that has a `command` as a Command
    # and stringifies the nested command; undo that here (the wire JSON is a CodeAction).
    cmds = []
    for a in actions or []:
        if isinstance(a, lsp.Command) and a.command.startswith("{"):
            cmds.append(ast.literal_eval(a.command))
        elif isinstance(a, lsp.CodeAction) and a.command is not None:
            cmds.append({"command": a.command.command, "arguments": _plain(a.command.arguments)})
    mine = [c["arguments"] for c in cmds if c["command"] == "stitch.profile"]
    assert mine == [[uri], [{"uri": uri, "full": True}]]
