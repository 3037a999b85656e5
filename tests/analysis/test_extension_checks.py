"""Checks on the CUDA a candidate builds, and on the precision the problem is in: each fires on
the trick and stays quiet on the honest form of the same code."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.analysis import Document, analyze
from stitch_lsp.cli.main import main
from stitch_lsp.config import Settings

from .conftest import codes, run

HEAD = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
MODELS = """

class Model(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        {call}
        return out


def get_inputs():
    return [torch.randn(8, 8), torch.randn(8, 8)]
"""


def extension(cuda: str, call: str = "ext.add_relu(x, y, out)", flags: str = "") -> str:
    return (
        HEAD
        + f'SRC = r"""\n#include <torch/extension.h>\n{cuda}\n"""\n'
        + 'ext = load_inline(name="e", cpp_sources="", cuda_sources=SRC, functions=["add_relu"]'
        + (f", extra_cuda_cflags={flags}" if flags else "")
        + ")\n"
        + MODELS.format(call=call)
    )


KERNEL = r"""
__global__ void add_relu_kernel(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(x[i] + y[i], 0.f);
}
"""


def wrapper(body: str) -> str:
    return (
        KERNEL
        + "void add_relu(torch::Tensor x, torch::Tensor y, torch::Tensor out) {\n"
        + body
        + "\n}\n"
    )


LAUNCH = (
    "  add_relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), "
    "y.data_ptr<float>(), out.data_ptr<float>(), x.numel());\n  cudaGetLastError();"
)


def serious(source: str) -> list:
    return [d for d in run(source).diagnostics if d.severity.value in ("error", "warning")]


def test_honest_wrapper_is_clean() -> None:
    assert serious(extension(wrapper(LAUNCH))) == []


@pytest.mark.parametrize(
    ("guard", "flags", "dead"),
    [
        ("#if 0", "", True),
        ("#ifdef FAST", "", True),
        ("#ifdef FAST", '["-DFAST", "-O3"]', False),  # the build defines it
        ("#ifdef FAST", "FLAGS", False),  # flags we cannot read: assume nothing
        ("#if defined(__CUDA_ARCH__)", "", False),  # the compiler's own macros are unknown
        ("#ifndef FAST", "", False),
    ],
)
def test_launches_under_preprocessor_conditions(guard: str, flags: str, dead: bool) -> None:
    body = f"{guard}\n{LAUNCH}\n#endif"
    src = extension(wrapper(body), flags=flags)
    if flags == "FLAGS":
        src = src.replace("ext = load_inline", "FLAGS = ['-DFAST']\next = load_inline")
    unused = codes(run(src), "kernel-unused")
    assert bool(unused) == dead, unused


def test_constant_if_hides_a_launch_but_a_runtime_condition_does_not() -> None:
    assert codes(run(extension(wrapper(f"if (false) {{\n{LAUNCH}\n}}"))), "kernel-unused")
    assert not codes(
        run(extension(wrapper(f"if (x.numel() > 0) {{\n{LAUNCH}\n}}"))), "kernel-unused"
    )


def test_zeroing_the_output_is_fine_zeroing_an_input_is_not() -> None:
    assert serious(extension(wrapper("  out.zero_();\n" + LAUNCH))) == []
    (found,) = codes(run(extension(wrapper(LAUNCH + "\n  x.zero_();"))), "input-mutation")
    assert "`x`" in found.message and found.severity.value == "warning"


def test_kernel_that_writes_its_input() -> None:
    cuda = wrapper(LAUNCH).replace(
        "if (i < n) out[i]", "if (i < n) { ((float*)x)[i] = 0.f; } out[i]"
    )
    (found,) = codes(run(extension(cuda)), "input-mutation")
    assert "add_relu_kernel" in found.message


def test_handles_and_workspaces_are_not_caches() -> None:
    body = (
        "  static int calls = 0;\n  static void* workspace = nullptr;\n"
        "  static cudaStream_t s = nullptr;\n  ++calls;\n" + LAUNCH
    )
    assert serious(extension(wrapper(body))) == []
    body = "  static std::map<const float*, torch::Tensor> seen;\n" + LAUNCH
    assert codes(run(extension("#include <map>\n" + wrapper(body))), "input-cache")


def test_a_zero_fill_kernel_beside_a_reading_kernel_is_fine() -> None:
    zero = (
        "__global__ void zero_kernel(float* p, int n) {\n"
        "  int i = threadIdx.x;\n  if (i < n) p[i] = 0.f;\n}\n"
    )
    body = "  zero_kernel<<<1, 32>>>(out.data_ptr<float>(), 8);\n" + LAUNCH
    assert serious(extension(zero + wrapper(body))) == []
    only_zero = wrapper("  zero_kernel<<<1, 32>>>(out.data_ptr<float>(), 8);").replace(KERNEL, zero)
    assert codes(run(extension(only_zero)), "constant-output")


HALF_KERNEL = r"""
#include <cuda_fp16.h>
__global__ void scale(const __half* x, __half* y, int n) {
  int i = threadIdx.x;
  if (i < n) y[i] = __float2half(__half2float(x[i]) * 2.f);
}
void add_relu(torch::Tensor x, torch::Tensor y, torch::Tensor out) {
  scale<<<1, 32>>>((const __half*)x.data_ptr(), (__half*)out.data_ptr(), 8);
  cudaGetLastError();
}
"""


def test_fp16_kernel_without_a_reference_is_not_a_downcast() -> None:
    source = extension(HALF_KERNEL).split("\n\nclass Model(")[0] + (
        "\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n"
        "        out = torch.empty_like(x)\n        ext.add_relu(x, y, out)\n        return out\n"
    )
    assert codes(run(source), "downcast") == []  # nothing says fp32; the kernel reads fp16
    assert codes(run(extension(HALF_KERNEL)), "downcast")  # the reference's inputs are fp32


def test_dtype_setting_and_flag_decide(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cand.py"
    path.write_text(extension(HALF_KERNEL))
    doc = Document.from_path(path)
    assert codes(analyze(doc, Settings(reference_dtype="float32")), "downcast")
    doc = Document.from_path(path)
    assert codes(analyze(doc, Settings(reference_dtype="float16")), "downcast") == []
    assert main(["check", "--dtype", "float16", str(path)]) == 0
    assert "downcast" not in capsys.readouterr().out
    main(["check", str(path)])
    assert "[stitch.downcast]" in capsys.readouterr().out


def test_whole_problem_only_when_the_reference_is_that_op_alone(tmp_path: Path) -> None:
    copy = r"""
__global__ void copy_kernel(const float* x, float* y, int n) {
  int i = threadIdx.x; if (i < n) y[i] = x[i];
}
void add_relu(torch::Tensor x, torch::Tensor y, torch::Tensor out) {
  copy_kernel<<<1, 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), 8);
  cudaGetLastError();
}
"""
    only_matmul = extension(copy).replace("torch.relu(x + y)", "torch.matmul(x, y)")
    only_matmul = only_matmul.replace(
        "out = torch.empty_like(x)", "x = torch.mm(x, y)\n        out = torch.empty_like(x)"
    )
    (found,) = codes(run(only_matmul), "torch-op")
    assert found.severity.value == "error" and "whole problem" in found.message
    with_tail = only_matmul.replace("torch.matmul(x, y)", "torch.matmul(x, y) * 2")
    (found,) = codes(run(with_tail), "torch-op")
    assert found.severity.value == "information"  # the GEMM stays on cuBLAS, the tail is ours
