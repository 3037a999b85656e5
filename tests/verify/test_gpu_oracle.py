"""On a real GPU: the float64 oracle, the extra baseline columns, the timeline.

A TF32 tensor-core GEMM passes atol = rtol = 1e-4 on all-positive inputs and must still be
reported as a precision downgrade; honest fp32 kernels whose sums run in another order must
pass. The worker processes run concurrently (independent CUDA contexts).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.verify.client import run_worker

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

DATA = Path(__file__).resolve().parent / "data"

CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "tf32_wmma": ("ref_matmul_positive.py", "cand_tf32_wmma.py", {}),
    "gemm_naive": ("ref_matmul_positive.py", "cand_gemm_naive.py", {}),
    "rowsum_sequential": ("ref_rowsum.py", "cand_rowsum_sequential.py", {}),
    "baselines": (
        "ref_bias_relu.py",
        "cand_good.py",
        {"compare_compile": True, "extra_baselines": True},
    ),
}


def run_case(name: str, cases: dict[str, tuple[str, str, dict[str, Any]]] = CASES) -> VerifyResult:
    ref, cand, kw = cases[name]
    request = VerifyRequest(
        reference=str(DATA / ref),
        candidate=str(DATA / cand),
        device="cuda:0",
        **{"trials": 3, "timing_trials": 10, "compare_compile": False, **kw},
    )
    return run_worker(request, python=sys.executable, env=dict(os.environ), timeout_s=500, cwd=DATA)


def dump(results: dict[str, VerifyResult], prefix: str) -> None:
    folder = os.environ.get("AREA_OUT")
    if folder:
        for name, res in results.items():
            Path(folder, f"{prefix}_{name}.json").write_text(res.model_dump_json(indent=2))


@pytest.fixture(scope="module")
def results() -> dict[str, VerifyResult]:
    with ThreadPoolExecutor(max_workers=len(CASES)) as ex:
        out = dict(zip(CASES, ex.map(run_case, CASES), strict=True))
    dump(out, "oracle")
    return out


def codes(res: VerifyResult) -> set[str]:
    return {e.code for e in res.exploits}


def test_tf32_gemm_passes_the_tolerance_but_is_a_precision_exploit(results) -> None:
    res = results["tf32_wmma"]
    assert res.correctness and res.correctness.passed, (res.message, res.log_tail[-2000:])
    assert res.status is VerifyStatus.exploit, res.message
    assert "stitch.exploit.precision" in codes(res)
    finding = next(e for e in res.exploits if e.code == "stitch.exploit.precision")
    assert "float64" in finding.message and "the reference itself" in finding.message
    assert float(finding.evidence["err_candidate"]) > 100 * float(finding.evidence["err_reference"])
    p = res.correctness.precision
    assert p is not None and p.note is None and not p.skipped
    assert {t.inputs for t in p.trials} == {"get_inputs", "signs", "range", "mantissa"}


@pytest.mark.parametrize("name", ["gemm_naive", "rowsum_sequential"])
def test_honest_fp32_in_another_order_passes(results, name: str) -> None:
    res = results[name]
    assert res.status is VerifyStatus.passed, (res.message, res.exploits, res.log_tail[-2000:])
    p = res.correctness.precision
    assert p is not None and len(p.trials) == 4 and not any(t.downgrade for t in p.trials), p
    # Another summation order: not bitwise equal to the reference, and about as accurate.
    assert any(t.candidate_error > 0 for t in p.trials)
    transformed = [t for t in p.trials if t.inputs != "get_inputs"]
    assert max(t.ratio or 0.0 for t in transformed) < p.factor / 2, p  # headroom


def test_extra_baselines_are_measured_with_tf32_off(results) -> None:
    res = results["baselines"]
    assert res.status is VerifyStatus.passed, (res.message, res.log_tail[-2000:])
    t = res.timing
    assert t and t.eager and t.compiled and t.candidate
    assert t.graph is not None, t.graph_note
    assert t.compiled_ro is not None, t.compile_ro_note
    assert t.graph_note is None and t.compile_ro_note is None
    assert not t.tf32 and res.correctness and not res.correctness.tf32
    medians = {"eager": t.eager.median, "compile": t.compiled.median}
    medians |= {"graph": t.graph.median, "compile-ro": t.compiled_ro.median}
    assert res.best_baseline == min(medians, key=medians.get)
    assert res.speedup_vs_best == pytest.approx(min(medians.values()) / t.candidate.median)
    assert res.speedup_vs_graph and res.speedup_vs_compile_ro
    # A copy in and a clone out are part of every replay: at least the bytes of both.
    assert t.floor_ms and t.graph.median > 0.5 * t.floor_ms


def test_timeline_is_present_and_plausible(results) -> None:
    res = results["baselines"]
    tl = res.timeline
    assert tl and tl.reference and tl.candidate, tl
    ref, cand = tl.reference, tl.candidate
    assert ref.forwards == 3 and ref.kernels == 2  # the add, then the relu
    assert cand.kernels == 1 and cand.copies == 0 and cand.streams == 1
    assert "bias_relu_kernel" in cand.top[0].name and cand.top[0].share == pytest.approx(1.0)
    for one in (ref, cand):
        assert 0 < one.busy_ms <= one.window_ms
        assert 0 < one.busy_fraction <= 1
        assert one.host_ms is not None and one.host_ms > 0
    # The fused kernel does one pass instead of two: less GPU time than the reference.
    assert cand.busy_ms < ref.busy_ms


# ----------------------------------------------------------------------------- in process


def test_graph_replay_gives_fresh_results_for_fresh_inputs() -> None:
    import torch

    from stitch_lsp.verify.worker.timing import GraphReplay

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model = model.cuda()
    first = [torch.randn(32, 64, device="cuda")]
    replay = GraphReplay(model, first)
    outs = []
    for _ in range(3):
        x = torch.randn(32, 64, device="cuda")  # a new tensor every call, not the captured one
        y = replay(x)
        with torch.no_grad():
            torch.testing.assert_close(y, model(x))
        outs.append(y)
    ptrs = {o.data_ptr() for o in outs}
    assert len(ptrs) == 3  # fresh storage every call: earlier results are not overwritten
    assert not torch.equal(outs[0], outs[1])
    assert replay.static_in[0].data_ptr() != first[0].data_ptr()


def test_activity_records_split_by_forward_and_see_side_streams() -> None:
    import torch

    from stitch_lsp.verify.timeline import summarise
    from stitch_lsp.verify.worker.activity import record
    from stitch_lsp.verify.worker.exploits import check_side_stream

    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def honest(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ x)

    def joined(x: torch.Tensor) -> torch.Tensor:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x @ x
        torch.cuda.current_stream().wait_stream(side)
        return y

    def sneaky(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        with torch.cuda.stream(side):
            torch.matmul(x, x, out=out)
        return out

    calls = record(honest, [a], calls=3)
    t = summarise(calls)
    assert t.forwards == 3 and t.kernels == 2 and t.streams == 1
    assert check_side_stream(calls) == []
    assert check_side_stream(record(joined, [a], calls=3)) == []
    found = check_side_stream(record(sneaky, [a], calls=3))
    assert [f.code for f in found] == ["stitch.exploit.side-stream"]


def test_floor_bandwidth_is_an_upper_bound() -> None:
    import torch

    from stitch_lsp.verify.worker.exploits import peak_bandwidth
    from stitch_lsp.verify.worker.timing import copy_bandwidth

    dev = torch.device("cuda")
    bw, source = peak_bandwidth(dev, lambda: copy_bandwidth(dev))
    assert bw >= copy_bandwidth(dev), source
