"""On a GPU: the profile worker profiles a candidate's reference too (for the results roofline)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stitch_lsp.config import Settings
from stitch_lsp.models.profile import ProfileRequest
from stitch_lsp.profile.worker.measure import find_ncu, run_profile

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(find_ncu() is None, reason="ncu (Nsight Compute) not found"),
]


def test_a_pair_file_gets_its_reference_profiled_with_every_kernel(tmp_path: Path) -> None:
    pair = tmp_path / "relu_bias_inline.py"
    shutil.copy(REPO / "examples" / "relu_bias_inline.py", pair)
    s = Settings()
    run = run_profile(
        ProfileRequest(
            path=str(pair),
            sections=list(s.ncu_sections),
            launch_count=8,
            report_dir=str(tmp_path / "reports"),
            reference=str(pair),
        )
    )
    assert run.ok, (run.error, run.log_tail[-2000:])
    assert run.report is not None and run.reference_report is not None, run.reference_error
    assert [k.name for k in run.report.kernels] == ["bias_relu_kernel"]
    # The reference's Model is nn.Linear then ReLU: cuBLAS's GEMM and PyTorch's own kernels.
    names = [k.name for k in run.reference_report.kernels]
    assert names and "bias_relu_kernel" not in names, names
    assert any(k.roofline is not None for k in run.reference_report.kernels)
