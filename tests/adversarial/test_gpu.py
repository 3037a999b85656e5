"""The adversarial suite on a GPU: the Verifier passes every honest candidate and stops every
candidate that only execution can expose.

Honest and `dynamic` candidates go through `stitch_lsp.verify.client.verify` as a user's would
(static checks first, then the worker). `both` candidates are also flagged statically, and an
error there would end the run before anything executes, so they go to the worker directly: the
point is that the Verifier stops them on its own as well. Workers run a few at a time on one
GPU, as a busy machine would run them.

With AREA_OUT set (benchmarks/device/adversarial.sh), each result is written there as JSON.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stitch_lsp.config import Settings
from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.verify.client import run_worker, verify

from .conftest import Case, select

pytestmark = pytest.mark.gpu

TRIALS = 3
TIMING_TRIALS = 5
WORKERS = 4
STOPPED = (VerifyStatus.exploit, VerifyStatus.incorrect)


def _timeout(case: Case) -> float:
    # load_inline builds compile torch's headers (about a minute, longer when several build).
    return 480.0 if "load_inline" in case.path.read_text() else 240.0


def _run(case: Case) -> VerifyResult:
    if case.expect == "both":
        request = VerifyRequest(
            reference=str(case.reference_path),
            candidate=str(case.path),
            device="cuda:0",
            trials=TRIALS,
            timing_trials=TIMING_TRIALS,
            compare_compile=False,
        )
        return run_worker(
            request,
            python=sys.executable,
            env=dict(os.environ),
            timeout_s=_timeout(case),
            cwd=case.path.parent,
        )
    settings = Settings(trials=TRIALS, timing_trials=TIMING_TRIALS)
    return verify(
        case.reference_path,
        case.path,
        settings,
        compare_compile=False,
        timeout_s=_timeout(case),
    )


@pytest.fixture(scope="module")
def results() -> dict[str, VerifyResult]:
    cases = select("honest", "dynamic", "both")
    # Slow load_inline builds first, so they overlap with the quick ones.
    cases.sort(key=lambda c: "load_inline" not in c.path.read_text())
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = dict(zip([c.name for c in cases], pool.map(_run, cases), strict=True))
    dump = os.environ.get("AREA_OUT")
    if dump:
        folder = Path(dump, "adversarial")
        folder.mkdir(parents=True, exist_ok=True)
        for name, res in done.items():
            (folder / f"{name}.json").write_text(res.model_dump_json(indent=2))
    return done


def _why(res: VerifyResult) -> str:
    found = "; ".join(f"{e.code}: {e.message}" for e in res.exploits)
    return f"{res.status.value}: {res.message} {found} {res.log_tail[-1500:]}"


@pytest.mark.parametrize("case", select("honest"), ids=lambda c: c.name)
def test_honest_candidate_passes_the_verifier(results: dict[str, VerifyResult], case: Case) -> None:
    res = results[case.name]
    assert res.status is VerifyStatus.passed, _why(res)
    assert res.exploits == []


@pytest.mark.parametrize("case", select("dynamic", "both"), ids=lambda c: c.name)
def test_hostile_candidate_is_stopped_by_running_it(
    results: dict[str, VerifyResult], case: Case
) -> None:
    res = results[case.name]
    assert res.status in STOPPED, f"{case.kind} ({case.disguise}) got through: {_why(res)}"
