"""The adversarial suite on a GPU: the Verifier passes every honest candidate and stops every
candidate that only execution can expose, and the builtin coder's own programs stay clean.

Honest and `dynamic` candidates go through `stitch_lsp.verify.client.verify` as a user's would
(static checks first, then the worker). `both` candidates are also flagged statically, and an
error there would end the run before anything executes, so they go to the worker directly: the
point is that the Verifier stops them on its own as well. Where a kind has a check made for it
(attribution for the heavy op left in a library, the harness snapshot, the output of a timed
run, outputs below atol), that check must be the one that stops it. Workers run a few at a
time on one GPU, as a busy machine would run them.

With AREA_OUT set (benchmarks/device/adversarial.sh), each result is written there as JSON.
STITCH_ADV_ONLY (candidate names) and STITCH_ADV_BUILTIN (reference stems), comma-separated,
run a subset, for a quick look on a machine with little time left; the rest is skipped.
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
from stitch_lsp.verify.report import render

from .conftest import Case, select

pytestmark = pytest.mark.gpu

TRIALS = 3
TIMING_TRIALS = 5
WORKERS = 10  # 16 cores on the device: the runs mostly wait on the GPU and nvcc
STOPPED = (VerifyStatus.exploit, VerifyStatus.incorrect)
KERNELBENCH = Path(__file__).resolve().parents[1] / "data" / "kernelbench"

# The check each kind was built against: it, not merely some check, must stop the candidate.
# (Side streams and fake joins race with the comparison, so `incorrect` may come first there.)
BY_KIND = {
    "heavy-op-in-library": "stitch.exploit.heavy-op-not-custom",
    "harness-patch": "stitch.exploit.harness-patch",
    "tiny-output": "stitch.exploit.below-atol",
}
BY_FILE = {
    "paste_01_cublas_concat": "stitch.exploit.heavy-op-not-custom",
    "paste_03_three_part": "stitch.exploit.heavy-op-not-custom",
    "count_03_call_stack": "stitch.exploit.timed-output",
}


ONLY = {n for n in os.environ.get("STITCH_ADV_ONLY", "").split(",") if n}
BUILTIN_ONLY = {n for n in os.environ.get("STITCH_ADV_BUILTIN", "").split(",") if n}


def _mechanism(case: Case) -> str | None:
    return BY_FILE.get(case.name) or BY_KIND.get(case.kind)


def _timeout(path: Path) -> float:
    # load_inline builds compile torch's headers (about a minute, longer when several build).
    return 480.0 if "load_inline" in path.read_text() else 240.0


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
            timeout_s=_timeout(case.path),
            cwd=case.path.parent,
        )
    settings = Settings(trials=TRIALS, timing_trials=TIMING_TRIALS)
    return verify(
        case.reference_path,
        case.path,
        settings,
        compare_compile=False,
        timeout_s=_timeout(case.path),
    )


def _dump(results: dict[str, VerifyResult], prefix: str = "") -> None:
    dump = os.environ.get("AREA_OUT")
    if dump:
        folder = Path(dump, "adversarial")
        folder.mkdir(parents=True, exist_ok=True)
        for name, res in results.items():
            (folder / f"{prefix}{name}.json").write_text(res.model_dump_json(indent=2))


@pytest.fixture(scope="module")
def results() -> dict[str, VerifyResult]:
    cases = [c for c in select("honest", "dynamic", "both") if not ONLY or c.name in ONLY]
    # Slow load_inline builds first, so they overlap with the quick ones.
    cases.sort(key=lambda c: "load_inline" not in c.path.read_text())
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = dict(zip([c.name for c in cases], pool.map(_run, cases), strict=True))
    _dump(done)
    return done


def _result(results: dict[str, VerifyResult], case: Case) -> VerifyResult:
    if case.name not in results:
        pytest.skip("not in STITCH_ADV_ONLY")
    return results[case.name]


def _why(res: VerifyResult) -> str:
    found = "; ".join(f"{e.code}: {e.message}" for e in res.exploits)
    return f"{res.status.value}: {res.message} {found} {res.log_tail[-1500:]}"


@pytest.mark.parametrize("case", select("honest"), ids=lambda c: c.name)
def test_honest_candidate_passes_the_verifier(results: dict[str, VerifyResult], case: Case) -> None:
    res = _result(results, case)
    assert res.status is VerifyStatus.passed, _why(res)
    assert res.exploits == []
    # Attribution ran: the share of the GPU time in the candidate's own kernels is reported.
    assert res.attribution is not None and res.attribution.gpu_ms > 0, res.attribution
    assert "custom kernels: " in render(res)


@pytest.mark.parametrize("case", select("dynamic", "both"), ids=lambda c: c.name)
def test_hostile_candidate_is_stopped_by_running_it(
    results: dict[str, VerifyResult], case: Case
) -> None:
    res = _result(results, case)
    assert res.status in STOPPED, f"{case.kind} ({case.disguise}) got through: {_why(res)}"


@pytest.mark.parametrize(
    "case", [c for c in select("dynamic", "both") if _mechanism(c)], ids=lambda c: c.name
)
def test_the_check_made_for_the_kind_stops_it(results: dict[str, VerifyResult], case: Case) -> None:
    res = _result(results, case)
    codes = {e.code for e in res.exploits}
    assert res.status is VerifyStatus.exploit and _mechanism(case) in codes, _why(res)
    if _mechanism(case) == "stitch.exploit.heavy-op-not-custom":
        a = res.attribution
        assert a is not None and a.heavy_alone and a.own < 0.5 < a.vendor + a.pytorch, a


# -- the builtin coder's programs: fused epilogues beside vendor GEMMs and convolutions --------

# KernelBench level 2 problem 11 at its size: on the H200 its fused program was once called
# faster than the roofline floor (the floor assumed the direct convolution's FLOPs).
LEVEL2_11 = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.batch_norm(x)
        x = self.tanh(x)
        x = self.max_pool(x)
        x = self.group_norm(x)
        return x


def get_inputs():
    return [torch.rand(512, 64, 32, 32)]


def get_init_inputs():
    return [64, 128, 5, 1, 1, 8, 8]
"""
BUILTIN = [
    "level2/76_Gemm_Add_ReLU.py",
    "level2/1_Conv2D_ReLU_BiasAdd.py",
    "level2/19_ConvTranspose2d_GELU_GroupNorm.py",
    "level3/1_MLP.py",
]


@pytest.fixture(scope="module")
def builtin_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VerifyResult]:
    from stitch_lsp.compiler import generate_candidates

    folder = tmp_path_factory.mktemp("builtin_programs")
    refs = []
    for rel in BUILTIN:
        if BUILTIN_ONLY and Path(rel).stem not in BUILTIN_ONLY:
            continue
        ref = folder / Path(rel).name
        ref.write_text((KERNELBENCH / rel).read_text())
        refs.append(ref)
    if not BUILTIN_ONLY or ELEVEN in BUILTIN_ONLY:
        eleven = folder / f"{ELEVEN}.py"
        eleven.write_text(LEVEL2_11)
        refs.append(eleven)
    settings = Settings(trials=TRIALS, timing_trials=TIMING_TRIALS)
    made = generate_candidates(refs, settings, candidate_dir=folder)
    pairs: list[tuple[Path, Path]] = []
    for ref, cand in zip(refs, made, strict=True):
        assert cand.handled and cand.source, f"{ref.name}: {cand.reason}"
        path = folder / f"{ref.stem}_stitch.py"
        path.write_text(cand.source)
        pairs.append((ref, path))

    def one(pair: tuple[Path, Path]) -> VerifyResult:
        return verify(*pair, settings, compare_compile=False, timeout_s=_timeout(pair[1]))

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = dict(zip([r.stem for r, _ in pairs], pool.map(one, pairs), strict=True))
    _dump(done, prefix="builtin_")
    return done


ELEVEN = "11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm"


@pytest.mark.parametrize("name", [Path(r).stem for r in BUILTIN] + [ELEVEN])
def test_builtin_programs_are_not_flagged_and_report_their_share(
    builtin_results: dict[str, VerifyResult], name: str
) -> None:
    if name not in builtin_results:
        pytest.skip("not in STITCH_ADV_BUILTIN")
    res = builtin_results[name]
    assert res.status is VerifyStatus.passed, _why(res)
    assert res.exploits == []
    a = res.attribution
    assert a is not None and a.gpu_ms > 0 and a.heavy_alone is None, a
    if a.own_kernels:  # fused kernels of its own (a GEMM with a cuBLASLt epilogue has none)
        assert a.own > 0, a
    assert f"custom kernels: {a.own:.0%} of GPU time" in render(res)
