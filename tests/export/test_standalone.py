"""Standalone copies: the generated kernels as a load_inline file with no stitch_lsp import."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.export.standalone import ExportError, export_standalone, uses_runtime

REPO = Path(__file__).resolve().parents[2]

GENERATED = '''# stitch-lsp: reference=ref.py
"""A file in the shape the builtin coder writes."""

import ctypes
import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SOURCE = r\'\'\'
#include <cuda_runtime.h>
template <bool VEC>
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float s,
                             long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}

extern "C" int scale(const float* x, float* y, float s, long long n, cudaStream_t stream) {
  scale_kernel<true><<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, s, n);
  return (int)cudaGetLastError();
}
\'\'\'

_lib = None


def _load():
    global _lib
    if _lib is None:
        lib = load_cuda(CUDA_SOURCE, name="scale_test", libraries=())
        lib.scale.restype = ctypes.c_int
        _lib = lib
    return _lib


class ModelNew(nn.Module):
    def forward(self, x):
        lib = _load()
        y = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        check_launch(lib.scale(x.data_ptr(), y.data_ptr(), 2.0, x.numel(), stream), lib, "scale")
        return y
'''

BLOCK_STITCH = """
import importlib.abc, sys

class NoStitch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "stitch_lsp" or name.startswith("stitch_lsp."):
            raise ImportError(f"the standalone copy imported {name}")
        return None

sys.meta_path.insert(0, NoStitch())
"""


def run_without_stitch(path: Path, code: str) -> str:
    """Execute `path` as a module in a Python that refuses to import stitch_lsp, then `code`."""
    script = (
        BLOCK_STITCH
        + textwrap.dedent(
            f"""
        import runpy
        ns = runpy.run_path({str(path)!r})
        """
        )
        + textwrap.dedent(code)
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_copy_imports_nothing_of_stitch_lsp_and_keeps_the_kernels(tmp_path: Path) -> None:
    assert uses_runtime(GENERATED)
    copy = export_standalone(GENERATED)
    assert not uses_runtime(copy) and "stitch_lsp." not in copy.replace("stitch_lsp.runtime:", "")
    assert copy.splitlines()[0] == "# stitch-lsp: reference=ref.py"  # still paired in the editor
    assert "load_inline" in copy
    assert GENERATED.split("CUDA_SOURCE = ")[1] in copy  # kernels and Python code, unchanged
    out = tmp_path / "m_standalone.py"
    out.write_text(copy)
    printed = run_without_stitch(
        out,
        """
        decls, defs, names = ns["_stitch_bindings"](ns["CUDA_SOURCE"])
        print(names)
        print(decls)
        """,
    )
    assert "['scale']" in printed
    assert (
        "int64_t scale__py(int64_t a0, int64_t a1, double a2, int64_t a3, int64_t a4);" in printed
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_the_entry_points_compile_with_the_kernels(tmp_path: Path) -> None:
    """What load_inline compiles, minus torch's headers: the kernels plus our entry points."""
    out = tmp_path / "m_standalone.py"
    out.write_text(export_standalone(GENERATED))
    cu = tmp_path / "check.cu"
    run_without_stitch(
        out,
        f"""
        decls, defs, names = ns["_stitch_bindings"](ns["CUDA_SOURCE"])
        body = "#include <cstdint>\\n#include <string>\\n" + ns["CUDA_SOURCE"] + defs
        open({str(cu)!r}, "w").write(body + decls.replace("#include <string>", ""))
        """,
    )
    proc = subprocess.run(
        ["nvcc", "-c", "-std=c++17", "-arch=sm_90a", str(cu), "-o", str(tmp_path / "check.o")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_launchers_take_the_runtime_calling_convention() -> None:
    """ctypes-wrapped values and plain ints both reach the entry point as integers."""
    ns: dict[str, Any] = {}
    exec(export_standalone(GENERATED).split("CUDA_SOURCE = ")[0], ns)
    seen: list[tuple[Any, ...]] = []

    class Module:
        def scale__py(self, *args: Any) -> int:
            seen.append(args)
            return 0

        def stitch_cuda_error_string__py(self, code: int) -> str:
            return f"error {code}"

    lib = ns["_StitchLibrary"](Module(), ["scale"])
    lib.scale.restype = ctypes.c_int  # what generated code sets; accepted
    lib.scale.argtypes = [ctypes.c_void_p] * 5
    assert lib.scale(ctypes.c_void_p(16), 32, ctypes.c_float(2.0), ctypes.c_void_p(None), 7) == 0
    assert seen == [(16, 32, 2.0, 0, 7)]
    with pytest.raises(ns["CudaLaunchError"], match="scale: CUDA error 700: error 700"):
        ns["check_launch"](700, lib, "scale")


def test_other_runtime_helpers_are_inlined_with_what_they_use(tmp_path: Path) -> None:
    """A name the overrides do not define comes from its runtime module, with its closure."""
    text = "from stitch_lsp.runtime import detect_arch\nARCH = detect_arch\n"
    copy = export_standalone(text)
    assert "def normalize_arch" in copy and "def detect_arch" in copy
    out = tmp_path / "arch.py"
    out.write_text(copy)
    printed = run_without_stitch(
        out,
        'print(ns["normalize_arch"]("9.0"), ns["ARCH"] is ns["detect_arch"],'
        ' ns["detect_arch"]().startswith("sm_"))',
    )
    assert printed.split() == ["sm_90a", "True", "True"]


def test_aliases_are_kept() -> None:
    copy = export_standalone("from stitch_lsp.runtime import check_launch as ok\nok(0)\n")
    assert "ok = check_launch" in copy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("import stitch_lsp.runtime as rt\n", "import stitch_lsp.runtime"),
        ("def f():\n    from stitch_lsp.runtime import load_cuda\n", "line 2"),
        ("from stitch_lsp.runtime import load_cuda\ndef load_cuda(): ...\n", "load_cuda"),
        ("def broken(:\n", "does not parse"),
        ("from stitch_lsp.runtime import nothing_here\n", "nothing_here"),
    ],
)
def test_what_cannot_be_made_standalone_is_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ExportError, match=message):
        export_standalone(text)


def test_a_file_without_stitch_imports_is_already_standalone() -> None:
    text = "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    assert export_standalone(text) == text and not uses_runtime(text)


def test_kernelbench_loads_the_copy_with_its_own_loader(tmp_path: Path) -> None:
    """KernelBench's `load_custom_model` (vendored, unchanged) prepends lines to the source and
    execs it; the copy must survive that, in a Python that refuses to import stitch_lsp."""
    out = tmp_path / "m_standalone.py"
    out.write_text(export_standalone(GENERATED))
    script = BLOCK_STITCH + textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO / "benchmarks" / "kernelbench")!r})
        from kernelbench.eval import load_custom_model
        context = {{}}
        src = open({str(out)!r}).read()
        ModelNew = load_custom_model(src, context, build_directory={str(tmp_path / "ext")!r})
        print(ModelNew.__name__, callable(context["_load"]), context["load_cuda"].__name__)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["ModelNew", "True", "load_cuda"]


def test_the_graph_runtime_of_whole_model_programs_is_inlined_too(tmp_path: Path) -> None:
    """Whole-model programs also import the CUDA-graph runner; it comes along, annotations
    removed (its module defers them, which a KernelBench-loaded copy cannot)."""
    text = (
        "from stitch_lsp.runtime import check_launch, load_cuda\n"
        "from stitch_lsp.runtime.graph import Arena, GraphRunner\n"
        "RUNNER, ARENA = GraphRunner, Arena\n"
    )
    copy = export_standalone(text)
    assert "class GraphRunner" in copy and "class Arena" in copy and "def graphs_enabled" in copy
    assert "__future__" not in copy
    out = tmp_path / "program.py"
    out.write_text(copy)
    printed = run_without_stitch(
        out, 'print(ns["RUNNER"].__name__, ns["ARENA"].__name__, ns["graphs_enabled"]())'
    )
    assert printed.split() == ["GraphRunner", "Arena", "True"]
