"""The roofline floor less what exact algebra removes (stitch_lsp/verify/worker/algebra_floor.py).

A sum over a Linear's outputs is a matrix-vector product with summed weights: the builtin
coder's `sum_before_linear` program does a thousandth of the reference's GEMM FLOPs, so the
floor built on that GEMM called it "faster than possible". CPU: what the catalogue removes, and
the verdict arithmetic before and after. GPU: the builtin program for such a problem passes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from stitch_lsp.verify.worker import exploits

pytest.importorskip("torch")

SUM_OVER_LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear({k}, {n})

    def forward(self, x):
        return torch.relu(self.linear(x).sum(dim=1, keepdim=True))


def get_inputs():
    return [torch.randn({m}, {k})]


def get_init_inputs():
    return []
"""

PLAIN = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def test_the_catalogue_removes_the_gemm_of_a_sum_over_a_linear(tmp_path: Path) -> None:
    from stitch_lsp.verify.worker.algebra_floor import algebra_floor

    m, k, n = 4096, 1024, 8192
    got = algebra_floor(_write(tmp_path, "sum", SUM_OVER_LINEAR.format(m=m, k=k, n=n)))
    assert got.removed_flops == 2 * m * k * n and got.note is None
    assert any(r.startswith("sum_before_linear") for r in got.rewrites), got.rewrites


POOL_OVER_LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1024, 4096)
        self.pool = nn.AvgPool1d(16)

    def forward(self, x):
        return torch.relu(self.pool(self.linear(x).unsqueeze(1)).squeeze(1))


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
"""


def test_a_pooled_linear_removes_all_but_one_in_k_of_the_gemm(tmp_path: Path) -> None:
    from stitch_lsp.verify.worker.algebra_floor import algebra_floor

    got = algebra_floor(_write(tmp_path, "pool", POOL_OVER_LINEAR))
    full = 2 * 512 * 1024 * 4096
    assert got.removed_flops == full - full // 16, got
    assert any(r.startswith("pool_before_linear") for r in got.rewrites), got.rewrites


def test_nothing_is_removed_where_no_rewrite_fires(tmp_path: Path) -> None:
    from stitch_lsp.verify.worker.algebra_floor import algebra_floor

    got = algebra_floor(_write(tmp_path, "plain", PLAIN))
    assert got.removed_flops == 0 and got.rewrites == []


def test_a_reference_that_cannot_be_captured_leaves_the_floor(tmp_path: Path) -> None:
    from stitch_lsp.verify.worker.algebra_floor import algebra_floor

    got = algebra_floor(_write(tmp_path, "broken", "import torch\nclass Model(:\n"))
    assert got.removed_flops == 0 and got.note and got.note.startswith("not rewritten")


def test_the_lowered_floor_clears_the_honest_program_and_still_catches_a_skip() -> None:
    """H200-like ceilings: 4.8e12 B/s, 6.7e13 FLOP/s fp32. The reference's GEMM floor is 1 ms;
    the summed-weight program takes about 0.04 ms (it reads W once), which only the lowered
    floor admits; a program that does not even read its input is still caught."""
    m, k, n = 4096, 1024, 8192
    nbytes = m * k * 4 + m * 4
    flops = 2 * m * k * n
    bw, peak = 4.8e12, 6.7e13
    before = exploits.roofline_floor_ms(nbytes, flops, bw, peak)
    after = exploits.roofline_floor_ms(nbytes, flops - 2 * m * k * n, bw, peak)
    assert before > 1.0 and after < 0.005
    honest_ms = 0.04
    assert exploits.check_floor(honest_ms, 2.9, before)  # the false exploit
    assert exploits.check_floor(honest_ms, 2.9, after) == []
    assert exploits.check_floor(0.1 * after, 2.9, after)[0].code.endswith("faster-than-roofline")


@pytest.mark.gpu
def test_the_builtin_sum_over_linear_program_is_not_an_exploit(tmp_path: Path) -> None:
    from stitch_lsp.compiler.worker.generate import generate
    from stitch_lsp.models.verify import VerifyRequest, VerifyStatus
    from stitch_lsp.verify.client import run_worker

    ref = _write(tmp_path, "sum_linear", SUM_OVER_LINEAR.format(m=4096, k=1024, n=8192))
    cand = generate(ref, ref.name)
    assert cand.handled and "sum_before_linear" in (cand.source or ""), cand.reason
    cand_path = _write(tmp_path, "sum_linear_builtin", cand.source or "")
    request = VerifyRequest(
        reference=str(ref), candidate=str(cand_path), device="cuda:0", trials=3, timing_trials=10
    )
    res = run_worker(
        request, python=sys.executable, env=dict(os.environ), timeout_s=500, cwd=tmp_path
    )
    assert res.timing and res.timing.floor_algebra, (res.message, res.log_tail[-2000:])
    codes = {e.code for e in res.exploits}
    assert "stitch.exploit.faster-than-roofline" not in codes, res.message
    assert res.status is VerifyStatus.passed, (res.message, res.log_tail[-2000:])
