"""Generated pointwise kernels run on the CPU, one CUDA thread after another.

A pointwise kernel (elementwise chains, casts, views, concatenation, padding, embedding lookups)
has no shared memory, barriers or warp shuffles: each thread runs a grid-stride loop on its own.
Compiled as host C++ (g++ with the CUDA headers, whose bf16/fp16 types work on the host) and
run thread by thread over a small grid, it computes exactly what it computes on a GPU, in
both its float4 and its scalar paths. The GPU-free tests feed each kernel the captured graph's
values (tests/builtin/interp.py) and compare what it writes with the graph's: the index math of
views, broadcasts and gathers is then checked on machines without a GPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stitch_lsp.compiler.codegen import Codegen, GroupKernel
from stitch_lsp.compiler.templates import PREAMBLE, REDUCED_PREAMBLE

# Host stand-ins for what a kernel reads from the CUDA runtime: the thread's coordinates, the
# read-only load and the one CUDA math function glibc lacks. The headers declare the runtime
# API; the launch-sizing helpers that call it are static and unused here, so nothing links it.
SHIM = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __forceinline__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
static uint3 threadIdx, blockIdx, blockDim, gridDim;
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int) { return v; }
inline void __syncthreads() {}
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }  // CUDA's is within 2 ulp of this
"""

_CTYPES = {"float": "float", "__nv_bfloat16": "__nv_bfloat16", "__half": "__half"}


@dataclass
class HostKernel:
    """One pointwise kernel built for the host: `run(pointers, vec)` runs the whole grid."""

    kernel: GroupKernel
    lib: Any

    def run(self, pointers: list[int], vec: bool, grid: int = 3, block: int = 64) -> None:
        arr = (ctypes.c_void_p * len(pointers))(*pointers)
        self.lib.stitch_host_run(arr, int(vec), grid, block)


def nvcc_include() -> Path | None:
    """The CUDA toolkit's headers (the bf16/fp16 types), where nvcc and g++ are installed."""
    import os

    nvcc = shutil.which("nvcc")
    if nvcc is None or shutil.which("g++") is None:
        return None
    homes = [os.environ.get("CUDA_HOME", ""), str(Path(nvcc).resolve().parent.parent)]
    for home in [*homes, "/usr/local/cuda"]:
        inc = Path(home) / "include"
        if home and (inc / "cuda_bf16.h").exists():
            return inc
    return None


def pointwise_kernels(cg: Codegen) -> list[GroupKernel]:
    """The kernels of a generated program that run thread by thread (no barriers)."""
    return [
        k for k in cg.kernels if k.group.kind == "pointwise" and "__syncthreads" not in k.source
    ]


def _driver(k: GroupKernel) -> str:
    """`stitch_host_run(args, vec, grid, block)`: every thread of the grid, one after another."""
    m = re.search(
        rf"__global__ void __launch_bounds__\(\d+\) {k.name}_kernel\((.*?)\) {{", k.source
    )
    assert m is not None, k.source[:300]
    params = [p.strip() for p in m[1].split(",")]
    casts = []
    for i, p in enumerate(params):
        ctype = p.rsplit(" ", 1)[0].replace("__restrict__", "").strip()
        casts.append(f"({ctype})a[{i}]")
    call = ", ".join(casts)
    return "\n".join(
        [
            'extern "C" void stitch_host_run(void** a, int vec, int grid, int block) {',
            "  gridDim = make_uint3(grid, 1, 1);",
            "  blockDim = make_uint3(block, 1, 1);",
            "  for (int b = 0; b < grid; ++b)",
            "    for (int t = 0; t < block; ++t) {",
            "      blockIdx = make_uint3(b, 0, 0);",
            "      threadIdx = make_uint3(t, 0, 0);",
            f"      if (vec) {k.name}_kernel<true>({call});",
            f"      else {k.name}_kernel<false>({call});",
            "    }",
            "}",
        ]
    )


def build(k: GroupKernel, include: Path, cache: Path | None = None) -> HostKernel:
    body = k.source.split('extern "C"', 1)[0]  # the kernel, not its CUDA launcher
    preamble = PREAMBLE.replace("#include <cuda_runtime.h>", "")
    src = "\n".join([SHIM, preamble, REDUCED_PREAMBLE.replace("#include", "// #include"), body])
    src += "\n" + _driver(k) + "\n"
    folder = cache or Path(tempfile.gettempdir()) / "stitch-host-kernels"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(src.encode()).hexdigest()[:16]
    so = folder / f"{k.name}_{key}.so"
    if not so.exists():  # built under a private name, then renamed: workers share the folder
        import os

        cpp = so.with_suffix(f".{os.getpid()}.cpp")
        cpp.write_text(src)
        tmp = cpp.with_suffix(".so")
        done = subprocess.run(
            [
                "g++",
                "-std=c++17",
                "-O1",
                "-shared",
                "-fPIC",
                "-w",
                f"-I{include}",
                str(cpp),
                "-o",
                str(tmp),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{k.name}: host build failed\n{done.stderr[-3000:]}")
        os.replace(tmp, so)
        cpp.unlink()
    lib = ctypes.CDLL(str(so))
    lib.stitch_host_run.restype = None
    return HostKernel(k, lib)


def _storage(t: Any, ctype: str) -> Any:
    """A value as a kernel's pointer reads it: contiguous, in the pointer's C type."""
    import torch

    base = ctype.replace("const", "").replace("*", "").replace("__restrict__", "").strip()
    dtype = {
        "float": torch.float32,
        "__nv_bfloat16": torch.bfloat16,
        "__half": torch.float16,
        "bool": torch.bool,
        "long long": torch.int64,
        "int": torch.int32,
    }[base]
    return t.detach().to(dtype).contiguous().clone()


def check_program(path: Path, model: Any, inputs: list[Any], include: Path) -> list[str]:
    """Every pointwise kernel of the builtin coder's program for `path`, run on the CPU from the
    captured graph's values: the outputs that differ from the graph's (empty: all agree).
    Returns also a line per kernel that could not be fed (an input the interpreter does not
    hold as one tensor), starting with 'skipped'."""
    import torch

    from stitch_lsp.compiler.partition import fold_gemm_epilogues, partition
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import run_graph_env

    graph = capture(path)
    apply_rewrites(graph)
    cg = Codegen(graph, fold_gemm_epilogues(graph, partition(graph)))
    cg.cuda_source(with_gemm=False)
    with torch.no_grad():
        env = run_graph_env(graph, model, inputs)
    problems: list[str] = []
    for k in pointwise_kernels(cg):
        host = build(k, include)
        # The float4 path runs only where the launcher may take it (never for bf16/fp16 data).
        paths = (False,) if "const bool vec = false;" in k.source else (False, True)
        for vec in paths:
            bufs: list[Any] = []
            outs: list[tuple[int, Any]] = []
            fed = True
            for a in k.args:
                if a.role == "ws":
                    bufs.append(torch.zeros(max(a.nbytes, 1), dtype=torch.uint8))
                    continue
                value = env.get(a.vid)
                if a.role == "out":
                    shape = graph.shape_of(a.vid)
                    bufs.append(_storage(torch.zeros(shape), a.ctype))
                    outs.append((a.vid, bufs[-1]))
                elif isinstance(value, torch.Tensor):
                    bufs.append(_storage(value, a.ctype))
                else:
                    fed = False
            if not fed:
                problems.append(f"skipped {k.name}: an input is not one tensor")
                break
            host.run([b.data_ptr() for b in bufs], vec)
            for vid, got in outs:
                want = _storage(env[vid], _ctype_of(got))
                tol = 1e-5 if got.dtype == torch.float32 else 1e-2
                if not torch.allclose(
                    got.float(), want.float().reshape(got.shape), tol, tol, equal_nan=True
                ):
                    diff = (got.float() - want.float().reshape(got.shape)).abs().max().item()
                    mode = "float4" if vec else "scalar"
                    problems.append(f"{k.name} ({mode} path) writes %{vid} off by {diff:.3g}")
    return problems


def _ctype_of(t: Any) -> str:
    return {
        "torch.float32": "float",
        "torch.bfloat16": "__nv_bfloat16",
        "torch.float16": "__half",
        "torch.bool": "bool",
        "torch.int64": "long long",
        "torch.int32": "int",
    }[str(t.dtype)]
