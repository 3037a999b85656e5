"""Records with NaN and infinities cross the worker boundary and reach an editor intact."""

from __future__ import annotations

import json
import math
from pathlib import Path

from stitch_lsp.models.commands import VerifyCommandResult
from stitch_lsp.models.verify import (
    CorrectnessReport,
    PrecisionReport,
    PrecisionTrial,
    TrialResult,
    VerifyResult,
    VerifyStatus,
)
from stitch_lsp.workers.launch import _read_result


def _result() -> VerifyResult:
    """What the verify worker saves for a candidate that is NaN on negative inputs: the float64
    oracle's error is infinite, the trial's errors NaN."""
    trial = PrecisionTrial(
        inputs="signs",
        candidate_error=math.inf,
        reference_error=1e-7,
        candidate_tol_units=math.inf,
        reference_tol_units=0.01,
        ratio=math.inf,
        downgrade=True,
    )
    return VerifyResult(
        status=VerifyStatus.exploit,
        message="input-distribution",
        reference="ref.py",
        candidate="cand.py",
        phase="done",
        correctness=CorrectnessReport(
            passed=False,
            atol=1e-4,
            rtol=1e-4,
            trials=[TrialResult(index=0, passed=False, max_abs_error=math.nan)],
            precision=PrecisionReport(trials=[trial], factor=10.0, floor=2.0),
        ),
    )


def test_non_finite_numbers_survive_the_result_file(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text(_result().model_dump_json())
    back, problem = _read_result(path, VerifyResult)
    assert problem == "" and back is not None
    assert back.correctness is not None and back.correctness.precision is not None
    assert back.correctness.precision.trials[0].candidate_error == math.inf
    assert math.isnan(back.correctness.trials[0].max_abs_error or 0.0)
    assert back.status is VerifyStatus.exploit


def test_an_editor_gets_valid_json() -> None:
    """JSON has no NaN: a bare NaN makes JSON.parse in the editor throw."""
    wire = VerifyCommandResult(
        ok=False, message="x", speedup_vs_eager=math.inf, speedup_vs_compile=math.nan
    ).to_wire()
    text = json.dumps(wire, allow_nan=False)  # raises on a bare NaN or Infinity
    assert '"Infinity"' in text and '"NaN"' in text
    result = json.dumps(json.loads(_result().model_dump_json()), allow_nan=False)
    assert '"Infinity"' in result
