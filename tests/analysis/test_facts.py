"""What the extractors find in Python and CUDA sources."""

from __future__ import annotations

from stitch_lsp.analysis import symbol_at
from stitch_lsp.analysis.model import KernelInfo, LaunchInfo, ModuleInfo

from .conftest import REPO, run

PROBLEM = """
import torch
import torch.nn as nn

class Block(nn.Module):
    def forward(self, x):
        return x

class Model(nn.Module):
    def __init__(self, in_features, out_features, *extra, scale=1.0, **kw):
        super().__init__()

    @torch.no_grad()
    def forward(self, x, y: torch.Tensor, z=None):
        return x

class Child(Block):
    pass

class NotAModule:
    def forward(self):
        pass

def get_inputs():
    return [torch.rand(2, 2)]

def get_init_inputs():
    return [2, 2]
"""


def test_python_modules_and_inputs() -> None:
    result = run(PROBLEM)
    names = [m.name for m in result.modules]
    assert names == ["Block", "Model", "Child"]
    model = result.module("Model")
    assert model is not None
    assert model.bases == ["nn.Module"]
    assert model.init_params == ["self", "in_features", "out_features", "*extra", "scale", "**kw"]
    assert model.forward_params == ["self", "x", "y", "z"]
    assert result.module("Child").forward_params is None
    assert result.get_inputs is not None and result.get_inputs.range[0] == 23
    assert result.get_init_inputs is not None
    assert not result.is_candidate
    kinds = {(s.name, s.kind) for s in result.symbols}
    assert ("Model", "module") in kinds and ("get_inputs", "function") in kinds
    assert not result.diagnostics


def test_load_inline_spellings() -> None:
    src = """
import torch
import torch.utils.cpp_extension
from torch.utils import cpp_extension
from torch.utils.cpp_extension import load_inline, load
import json
a = torch.utils.cpp_extension.load_inline(
    name="a", cpp_sources="", cuda_sources="__global__ void ka() {}", functions=["f", "g"]
)
b = cpp_extension.load_inline("b", "", "__global__ void kb() {}")
c = load(name="c", sources=["c.cpp", "c.cu"])
d = json.load(open("x"))
e = torch.load("w.pt")
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="m", cpp_sources="", cuda_sources=["__global__ void km() {}"])
"""
    result = run(src)
    calls = result.load_inline_calls
    assert [c.function for c in calls] == [
        "torch.utils.cpp_extension.load_inline",
        "cpp_extension.load_inline",
        "load",
        "load_inline",
    ]
    assert calls[0].name == "a" and calls[0].functions == ["f", "g"] and calls[0].target == "a"
    assert calls[1].name == "b" and calls[1].embedded
    assert calls[2].kind == "load" and calls[2].sources == ["c.cpp", "c.cu"]
    assert calls[3].target == "self.ext"
    assert {k.name for k in result.kernels} == {"ka", "kb", "km"}


CUDA = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>
#define THREADS 100

template <typename T>
__global__ void __launch_bounds__(256) scale(T* __restrict__ x, T a, int n) {
    __shared__ float tile[32][33];
    extern __shared__ float dyn[];
    __syncthreads();
    __syncthreads();
}

__device__ __forceinline__ float sq(float v) { return v * v; }
__host__ __device__ int both(int v) { return v; }

void gemm(cublasHandle_t h) {
    cublasSgemm(h, 0, 0, 1, 1, 1, nullptr, nullptr, 1, nullptr, 1, nullptr, nullptr, 1);
}

namespace ns {
__global__ void inner(float* x) {}
}

void run(float* x, int n, cudaStream_t s) {
    dim3 block(16, 16);
    scale<float><<<(n + 255) / 256, 256, 0, s>>>(x, 2.0f, n);
    ns::inner<<<1, block>>>(x);
    scale<float><<<1, THREADS>>>(x, 1.0f, n);
    cudaError_t err = cudaGetLastError();
}
"""


def test_cuda_facts() -> None:
    result = run(CUDA, "cuda-cpp", "file:///tmp/k.cu")
    kernels = {k.name: k for k in result.kernels}
    assert set(kernels) == {"scale", "sq", "both", "inner"}
    scale = kernels["scale"]
    assert scale.kind == "kernel" and scale.template
    assert scale.params == ["T* __restrict__ x", "T a", "int n"]
    assert scale.shared_memory == [
        "__shared__ float tile[32][33];",
        "extern __shared__ float dyn[];",
    ]
    assert scale.syncthreads == 2
    assert len(scale.launch_sites) == 2
    assert kernels["sq"].kind == "device_function" and kernels["both"].kind == "device_function"
    launches = result.launches
    assert [(la.kernel, la.grid, la.block, la.shared_mem, la.stream) for la in launches] == [
        ("scale", "(n + 255) / 256", "256", "0", "s"),
        ("inner", "1", "block", None, None),
        ("scale", "1", "THREADS", None, None),
    ]
    assert all(la.error_checked for la in launches)
    run_fn = next(s for s in result.symbols if s.name == "run")
    assert [c.kind for c in run_fn.children] == ["launch"] * 3
    # #define THREADS 100 -> a block of 100 threads
    block = [d for d in result.diagnostics if d.code == "stitch.block-size"]
    assert len(block) == 1 and "100 threads" in block[0].message


def test_symbol_at() -> None:
    result = run((REPO / "examples" / "relu_bias_inline.py").read_text())
    launch = result.launches[0]
    hit = symbol_at(result, launch.name_range[0], launch.name_range[1] + 1)
    assert isinstance(hit, LaunchInfo) and hit.kernel == "bias_relu_kernel"
    kernel = next(k for k in result.kernels if k.name == "bias_relu_kernel")
    hit = symbol_at(result, kernel.selection_range[0], kernel.selection_range[1])
    assert isinstance(hit, KernelInfo)
    model_new = result.module("ModelNew")
    hit = symbol_at(result, model_new.selection_range[0], model_new.selection_range[1])
    assert isinstance(hit, ModuleInfo) and hit.name == "ModelNew"
    assert symbol_at(result, 0, 0) is None


def test_query_files_are_found_and_compile() -> None:
    from stitch_lsp.analysis import grammars

    root = grammars.grammars_dir()
    assert (root / "python" / "definitions.scm").is_file()
    for lang in ("python", "cuda"):
        for scm in (root / lang).glob("*.scm"):
            grammars.query(lang, scm.stem)  # raises on a syntax error in the query
    grammars.warm_up()
