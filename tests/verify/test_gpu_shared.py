"""The Verifier on a GPU that another process keeps busy.

A second process spins an 8192^3 GEMM in a loop on the same GPU for the whole module, and
several verifications run at once beside it. Time-slicing then stretches every wall clock and
event interval and lowers any copy rate measured here. The checks that must not change their
verdict because of it: honest kernels pass (no side-stream, no faster-than-roofline), the
hostile ones fail for their own reason (KernelBench's zero-out and result-reuse kernels are
`incorrect`, work left on a side stream is `side-stream`, TF32 is a precision downgrade).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.models.verify import VerifyResult, VerifyStatus

from .test_gpu_oracle import DATA, dump, run_case

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "good": ("ref_bias_relu.py", "cand_good.py", {}),
    "gemm_naive": ("ref_matmul_positive.py", "cand_gemm_naive.py", {}),
    "rowsum_sequential": ("ref_rowsum.py", "cand_rowsum_sequential.py", {}),
    "zero_out": ("ref_bias_relu.py", "cand_zero.py", {}),
    "result_reuse": ("ref_bias_relu.py", "cand_result_reuse.py", {}),
    "side_stream": ("ref_bias_relu.py", "cand_side_stream.py", {}),
    "tf32_wmma": ("ref_matmul_positive.py", "cand_tf32_wmma.py", {}),
    "wrong": ("ref_bias_relu.py", "cand_wrong.py", {}),
}
HONEST = ("good", "gemm_naive", "rowsum_sequential")
TIMING_EXPLOITS = {"stitch.exploit.side-stream", "stitch.exploit.faster-than-roofline"}


@pytest.fixture(scope="module")
def spinner() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(DATA / "gpu_spinner.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "spinning" not in line:
            pytest.fail(f"the busy-GPU process did not start: {line!r}")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def results(spinner: subprocess.Popen[str]) -> dict[str, Any]:
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(CASES)) as ex:
        out: dict[str, Any] = dict(
            zip(CASES, ex.map(lambda n: run_case(n, CASES), CASES), strict=True)
        )
    dump(out, "shared")
    out["spinner_alive"] = spinner.poll() is None
    out["seconds"] = time.monotonic() - start
    return out


def codes(res: VerifyResult) -> set[str]:
    return {e.code for e in res.exploits}


def test_the_gpu_was_shared_throughout(results: dict[str, Any]) -> None:
    assert results["spinner_alive"]


@pytest.mark.parametrize("name", HONEST)
def test_honest_kernels_pass_on_a_busy_gpu(results: dict[str, Any], name: str) -> None:
    res: VerifyResult = results[name]
    assert res.status is VerifyStatus.passed, (res.message, res.exploits, res.log_tail[-2000:])
    assert not codes(res) & TIMING_EXPLOITS
    assert res.timeline and res.timeline.candidate, res.timeline


@pytest.mark.parametrize("name", ["zero_out", "result_reuse", "wrong"])
def test_wrong_results_are_incorrect_not_timing_exploits(
    results: dict[str, Any], name: str
) -> None:
    res: VerifyResult = results[name]
    assert res.status is VerifyStatus.incorrect, (res.message, res.exploits)


def test_side_stream_is_caught_for_its_own_reason(results: dict[str, Any]) -> None:
    res: VerifyResult = results["side_stream"]
    assert res.status in {VerifyStatus.incorrect, VerifyStatus.exploit}, res.message
    if res.status is VerifyStatus.exploit:
        assert codes(res) == {"stitch.exploit.side-stream"}, res.exploits


def test_tf32_is_a_precision_exploit_on_a_busy_gpu(results: dict[str, Any]) -> None:
    res: VerifyResult = results["tf32_wmma"]
    assert res.status is VerifyStatus.exploit and codes(res) == {"stitch.exploit.precision"}


def test_the_floor_does_not_come_from_a_busy_measurement(results: dict[str, Any]) -> None:
    from stitch_lsp.verify.worker.exploits import BANDWIDTH

    res: VerifyResult = results["good"]
    assert res.timing and res.timing.floor_source, res.timing
    if any(key in (res.gpu_name or "") for key in BANDWIDTH):
        assert "datasheet" in res.timing.floor_source
    assert Path(res.candidate).name == "cand_good.py"
