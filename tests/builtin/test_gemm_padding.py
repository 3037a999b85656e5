"""A bf16/fp16 GEMM whose n (a row of C) is not a multiple of 16 bytes: GPT-2's 50,257-word head.

cuBLAS runs such a GEMM on an align-1 kernel, 1.66 ms of GPT-2's 3.4 ms forward on an H200,
also when C's rows are padded (BENCHMARKS.md, "Session 10, second call"). The launcher computes
C with n rounded up, from a copy of B padded the same way, and packs C's first n columns out.

CPU: which launchers pad, the workspace they ask for, and that they compile for sm_90a. GPU: the
padded GEMMs, and GEMMs with cuBLASLt's bias + GELU epilogue, match the model.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, on_gpu, write_problem

torch = pytest.importorskip("torch")

_SOURCE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(64, {n}, bias={bias})
        self.w = nn.Parameter(torch.randn(64, {n}) * 0.1)
        self.to(torch.{dtype})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {forward}


def get_inputs():
    return [torch.randn(256, 64, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""

# name -> (n, bias, forward, dtype); the layer norm is GPT-2's ln_f, work of our own before the
# head. head: B^T stored (n rows of k); matmul: B stored (k rows of n); bias: cuBLASLt's epilogue
# (the bias padded too); small: under PAD_C_MIN, left as it is.
_LN = "F.layer_norm(x, (64,))"
CASES = {
    "head_bf16": (4099, False, f"self.head({_LN})", "bfloat16"),
    "matmul_fp16": (4099, False, f"{_LN} @ self.w", "float16"),
    "head_bias_bf16": (4099, True, f"self.head({_LN})", "bfloat16"),
    "aligned_bf16": (4096, False, f"self.head({_LN})", "bfloat16"),
    "small_bf16": (99, False, f"self.head({_LN})", "bfloat16"),
    # bias and the tanh GELU in cuBLASLt's epilogue (GPT-2's MLP), aligned and padded
    "gelu_bias_bf16": (4096, True, f"F.gelu(self.head({_LN}), approximate='tanh')", "bfloat16"),
    "gelu_bias_fp16": (4099, True, f"F.gelu(self.head({_LN}), approximate='tanh')", "float16"),
}
PADDED = ("head_bf16", "matmul_fp16", "head_bias_bf16", "gelu_bias_fp16")


def _write(tmp_path: Path, name: str) -> Path:
    n, bias, forward, dtype = CASES[name]
    source = _SOURCE.format(n=n, bias=bias, forward=forward, dtype=dtype)
    return write_problem(tmp_path, name, source)


@pytest.mark.parametrize("name", sorted(CASES))
def test_which_gemms_pad_b_and_c(tmp_path: Path, name: str) -> None:
    cand = generate_for(_write(tmp_path, name))
    assert cand.handled, cand.reason
    source = cand.cuda_source or ""
    n = CASES[name][0]
    if "gelu" in name:  # one cuBLASLt call, its epilogue act 2: bias, then GELU
        assert "+ bias, GELU (tanh) on cuBLASLt" in source
        assert re.search(r"stitch_lt_plan\(plans\[dev\],[^;]*, 2, ", source)
        assert "st_gelu_tanh(" not in source.split("// ---- ")[-1]
    packs = "packed by one 2-D copy" in source
    pads_b = "B padded to 4104 columns" in source
    assert packs == pads_b == (name in PADDED), name
    if not pads_b:
        return
    # cuBLAS is asked for 4,104 columns of C, in 16-byte rows, from B's padded copy
    blas = "stitch_lt_plan(plans[dev]," if "bias" in name else "cublasGemmEx(h,"
    assert re.search(re.escape(blas) + r" CUBLAS_OP_\w, CUBLAS_OP_\w, 4104, 256, 64,", source)
    assert ", bp, " in source and f"{n * 2}, 256, cudaMemcpyDeviceToDevice" in source
    c_bytes, b_bytes = 256 * 4104 * 2, 4104 * 64 * 2
    if "bias" in name:
        assert "&biasp, sizeof(biasp)" in source
        b_bytes += 4104 * 2
    ws = [a for k in _kernels(tmp_path / f"{name}.py") for a in k.args if a.role == "ws"]
    assert [a.nbytes for a in ws] == [c_bytes + b_bytes]


def _kernels(path: Path) -> list[Any]:
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.partition import fold_gemm_epilogues, partition
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(path)
    apply_rewrites(graph)
    cg = Codegen(graph, fold_gemm_epilogues(graph, partition(graph)))
    cg.cuda_source()
    return list(cg.kernels)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_padded_gemms_compile_for_hopper(tmp_path: Path) -> None:
    from stitch_lsp.runtime import build_cuda

    from .test_generate_compile import _has_cublas

    if not _has_cublas():
        pytest.skip("no cuBLAS headers in the toolkit or the nvidia-cublas wheel")
    for name in PADDED:
        cand = generate_for(_write(tmp_path, name))
        build_cuda(cand.cuda_source or "", name=f"pad_{name}", libraries=("cublas",), arch="sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_padded_gemms_match_the_model_on_the_gpu(tmp_path: Path, name: str) -> None:
    ref, _, model, model_new = on_gpu(_write(tmp_path, name), f"pad_{name}")
    dev = torch.device("cuda")
    for call in range(3):  # the first call runs plainly, later ones replay a CUDA graph
        torch.manual_seed(40 + call)
        inputs = [t.to(dev) for t in ref.get_inputs()]
        with torch.no_grad():
            want = model(*inputs)
            got = model_new(*inputs)
        assert got.shape == want.shape and got.dtype == want.dtype and got.is_contiguous()
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)
