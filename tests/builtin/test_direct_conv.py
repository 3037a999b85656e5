"""Transposed convolutions of few terms per output run in the generated kernels
(stitch_lsp/compiler/direct_conv.py): which ones, and that the kernels compute them, on the CPU
through the host emulation (tests/builtin/host_kernels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.compiler.codegen import Codegen

from .helpers import generate_for, write_problem
from .host_kernels import chained_output, check_program, nvcc_include, seeded_problem

torch = pytest.importorskip("torch")
INCLUDE = nvcc_include()

# KernelBench's 72 (ConvTranspose3d 3 -> 16 at stride 2, a training-mode batch norm, two average
# pools) at a small size, beside a grouped 2-D transposed convolution with output padding and
# uneven strides, and a 1-D one at stride 1 whose padding crops more than a tap.
SMALL_TRANSPOSED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv3 = nn.ConvTranspose3d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm3d(8)
        self.pool = nn.AvgPool3d(2)
        self.conv2 = nn.ConvTranspose2d(4, 6, (3, 4), stride=(2, 3), padding=(1, 0),
                                        output_padding=(1, 2), groups=2)
        self.conv1 = nn.ConvTranspose1d(2, 5, 5, stride=1, padding=3, bias=False)
        self.to(DTYPE)

    def forward(self, x, y, z):
        a = self.pool(self.pool(self.bn(self.conv3(x))))
        b = F.gelu(self.conv2(y))
        c = torch.tanh(self.conv1(z)).sum(dim=-1)
        return a, b, c


def get_inputs():
    shapes = [(2, 3, 5, 6, 7), (3, 4, 5, 4), (2, 2, 9)]
    return [torch.randn(s).to(DTYPE) for s in shapes]


def get_init_inputs():
    return []
"""

WIDE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1)  # 16 x 4 terms: cuDNN
        self.dil = nn.ConvTranspose2d(2, 4, 3, stride=2, dilation=2)  # dilated: cuDNN
        self.fwd = nn.Conv2d(3, 8, 3)  # a forward convolution: cuDNN

    def forward(self, x, y, z):
        return torch.relu(self.up(x)), torch.relu(self.dil(y)), torch.relu(self.fwd(z))


def get_inputs():
    return [torch.randn(2, 16, 6, 6), torch.randn(2, 2, 6, 6), torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return []
"""


def _plan(path: Path) -> tuple[object, list[object]]:
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.stages import plan_stages
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(path)
    apply_rewrites(graph)
    return graph, plan_stages(graph)


def test_few_term_transposed_convolutions_leave_cudnn(tmp_path: Path) -> None:
    """3 x 8, 2 x 4 and 2 x 5 terms per output: computed in the kernels, no cuDNN stage left;
    16 x 4 terms, a dilated one and a forward convolution stay on cuDNN."""
    source = SMALL_TRANSPOSED.replace("DTYPE", "torch.float32")
    graph, groups = _plan(write_problem(tmp_path, "small_t", source))
    assert not [g for g in groups if g.kind == "conv"]  # type: ignore[attr-defined]
    convs = [n for n in graph.nodes if n.kind == "conv"]  # type: ignore[attr-defined]
    assert len(convs) == 3 and all(n.params.get("direct") for n in convs)
    cand = generate_for(write_problem(tmp_path, "small_t_gen", source))
    assert cand.handled, cand.reason
    text = cand.source or ""
    assert "F.conv_transpose" not in text  # no cuDNN call left
    assert "instead of cuDNN: self.conv3 (line 19), self.conv2 (line 20)" in text, text[:3000]
    graph, groups = _plan(write_problem(tmp_path, "wide", WIDE))
    assert len([g for g in groups if g.kind == "conv"]) == 3  # type: ignore[attr-defined]
    assert not any(n.params.get("direct") for n in graph.nodes)  # type: ignore[attr-defined]


@pytest.mark.skipif(INCLUDE is None, reason="needs nvcc's CUDA headers and g++")
@pytest.mark.parametrize("case", ["float32", "bfloat16", "split"])
def test_direct_transposed_convolutions_compute_the_model(tmp_path: Path, case: str) -> None:
    """Each launcher agrees with the captured graph, and the launches chained (the batch norm's
    moments beside the stored convolution, the pools from it) give the model's output,
    training-mode batch norm included. `split`: channels of 59,582 outputs, each split over
    three blocks (partial moments in the workspace), as the full-size problem's are."""
    dtype = "bfloat16" if case == "bfloat16" else "float32"
    source = SMALL_TRANSPOSED.replace("DTYPE", f"torch.{dtype}")
    if dtype != "float32":  # PyTorch's CPU build has no bf16 avg_pool3d for the reference
        source = source.replace("self.pool(self.pool(self.bn(", "torch.relu((self.bn(")
    if case == "split":
        source = source.replace("(2, 3, 5, 6, 7)", "(2, 3, 16, 16, 16)")
    path = write_problem(tmp_path, f"direct_{case}", source)
    model, inputs = seeded_problem(path, f"host_direct_{case}")
    model.train()
    assert check_program(path, model, inputs, INCLUDE) == []  # type: ignore[arg-type]
    graph, groups = _plan(path)
    if case == "split":
        cg = Codegen(graph, groups)  # type: ignore[arg-type]
        assert "constexpr idx_t S = 3," in cg.cuda_source(with_gemm=False)
    got = chained_output(graph, model, inputs, INCLUDE)  # type: ignore[arg-type]
    with torch.no_grad():
        want = model(*inputs)[0]
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert torch.allclose(got.float(), want.float(), atol=tol, rtol=tol), (
        (got.float() - want.float()).abs().max()
    )


@pytest.mark.gpu
def test_direct_transposed_convolutions_match_the_model_on_the_gpu(tmp_path: Path) -> None:
    """KernelBench's 72 at a tenth of its batch, training mode: output and running statistics
    as the model's, over a plain call, the graph capture and a replay."""
    from .helpers import fresh_candidate, import_path

    source = SMALL_TRANSPOSED.replace("DTYPE", "torch.float32")
    source = source.replace(
        "[(2, 3, 5, 6, 7), (3, 4, 5, 4), (2, 2, 9)]",
        "[(6, 3, 32, 32, 32), (8, 4, 33, 31), (4, 2, 301)]",
    )
    assert "(4, 2, 301)" in source
    ref_path = write_problem(tmp_path, "direct_gpu", source)
    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    assert "F.conv_transpose" not in (cand.source or "")
    cand_path = tmp_path / "direct_gpu_builtin.py"
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, "gpu_ref_direct")
    new = import_path(cand_path, "gpu_new_direct")
    torch.manual_seed(0)
    model = ref.Model().to("cuda").train()
    model_new = fresh_candidate(new, model).train()
    for call in range(3):
        torch.manual_seed(10 + call)
        inputs = [t.cuda() for t in ref.get_inputs()]
        with torch.no_grad():
            want, got = model(*inputs), model_new(*inputs)
        for w, g in zip(want, got, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(model_new.bn.running_var, model.bn.running_var)
        torch.testing.assert_close(model_new.bn.running_mean, model.bn.running_mean)
