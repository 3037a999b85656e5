"""Inside bubblewrap the GPU is still there: a builtin program verifies and ncu profiles it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stitch_lsp.agents.verifier import profile_candidate, with_reference_inputs
from stitch_lsp.compiler import generate_candidate
from stitch_lsp.config import Settings
from stitch_lsp.verify import verify
from stitch_lsp.workers.sandbox import sandbox_problem

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

KB = Path(__file__).resolve().parents[1] / "data" / "kernelbench"
NO_BWRAP = sandbox_problem()
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=f"no sandbox here: {NO_BWRAP}")


def _problem() -> Path:
    return sorted((KB / "level1").glob("19_*.py"))[0]


@needs_bwrap
def test_sandboxed_verify_reaches_the_gpu(tmp_path: Path) -> None:
    ref = _problem()
    settings = Settings(sandbox="bwrap", trials=2, timing_trials=5)
    cand = generate_candidate(ref, settings, candidate_dir=tmp_path)
    assert cand.handled and cand.source, cand.reason
    path = tmp_path / "cand.py"
    path.write_text(cand.source)
    res = verify(ref, path, settings, compare_compile=False, extra_baselines=False)
    assert res.sandbox == "bwrap"
    assert res.status.value == "passed", (res.message, res.log_tail[-2000:])
    assert res.device and res.device.startswith("cuda")
    assert res.speedup_vs_eager and res.speedup_vs_eager > 0


@needs_bwrap
@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu (Nsight Compute) not found")
def test_sandboxed_profile_runs_ncu(tmp_path: Path) -> None:
    ref = _problem()
    settings = Settings(sandbox="bwrap")
    cand = generate_candidate(ref, settings, candidate_dir=tmp_path)
    assert cand.handled and cand.source, cand.reason
    path = tmp_path / "cand.py"
    path.write_text(with_reference_inputs(cand.source, ref))
    summary, _hints = profile_candidate(path, settings, reference=ref)
    assert summary and not summary.startswith("not profiled"), summary
