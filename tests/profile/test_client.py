"""One client for the profile worker (each caller keeps its own time limit), and one projection
of a profiled kernel into the rows the CLI, the editor and the loop show."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stitch_lsp.config import Settings
from stitch_lsp.gpus import inventory
from stitch_lsp.models.profile import (
    Bottleneck,
    LaunchConfig,
    Occupancy,
    ProfileReport,
    ProfileRequest,
    ProfileResult,
    ProfileRun,
    Roofline,
    RuleResult,
    StallReason,
)
from stitch_lsp.profile import client
from stitch_lsp.profile.summary import summarize
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import WorkerCall, WorkerReply


def _kernel(name: str = "fused_relu", ns: float = 12_345.0) -> ProfileResult:
    return ProfileResult(
        name=name,
        duration_ns=ns,
        sm_throughput_pct=41.5,
        memory_throughput_pct=87.25,
        dram_bytes_per_s=2.5e12,
        occupancy=Occupancy(theoretical_pct=100.0, achieved_pct=62.5, limiter="registers"),
        launch=LaunchConfig(
            block=(256, 1, 1),
            grid=(528, 1, 1),
            block_size=256,
            grid_size=528,
            registers_per_thread=40,
            waves_per_sm=1.2,
        ),
        stalls=[StallReason(name="long_scoreboard", samples=10.0, pct=55.0)],
        bottleneck=Bottleneck.memory,
        bottleneck_reason="DRAM 87% of peak",
        roofline=Roofline(
            achieved_flops=3.0e11,
            peak_flops=6.0e13,
            dram_bytes_per_s=2.5e12,
            peak_dram_bytes_per_s=4.8e12,
            arithmetic_intensity=0.12,
            bound="memory",
        ),
        rules=[
            RuleResult(rule_id="A", message="First. More.", type=2, speedup_pct=30.0),
            RuleResult(rule_id="B", message="Second.", type=2, speedup_pct=20.0),
            RuleResult(rule_id="C", message="Third.", type=3, speedup_pct=10.0),
        ],
    )


class _Recorder:
    def __init__(self, run: ProfileRun) -> None:
        self.calls: list[WorkerCall[Any]] = []
        self.cancels: list[threading.Event | None] = []
        self.run = run

    def __call__(
        self, call: WorkerCall[Any], cancel: threading.Event | None = None, launcher: Any = None
    ) -> WorkerReply[Any]:
        self.calls.append(call)
        self.cancels.append(cancel)
        return WorkerReply(result=self.run, log_tail="", seconds=0.0)


def _ok_run() -> ProfileRun:
    return ProfileRun(ok=True, report=ProfileReport(report_path="r.ncu-rep", kernels=[_kernel()]))


def test_the_call_is_the_profile_worker_with_the_given_limit() -> None:
    req = ProfileRequest(path="/w/c.py")
    call = client.profile_call(req, timeout_s=123.0, sandbox="none", device="cuda:1")
    assert call.module == WORKER_ENTRY_POINTS["profile"]
    assert call.result is ProfileRun and call.request is req
    assert call.timeout_s == 123.0 and call.sandbox == "none"
    assert call.env == {"CUDA_VISIBLE_DEVICES": inventory().physical("cuda:1")}
    assert call.label == "the profile worker"
    assert client.profile_call(req, timeout_s=1.0, sandbox=None).env == {}


def test_the_loop_profiler_keeps_its_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from stitch_lsp.agents.verifier import profile_candidate

    rec = _Recorder(_ok_run())
    monkeypatch.setattr(client, "run_worker", rec)
    cancel = threading.Event()
    ref = tmp_path / "p.py"
    settings = Settings(verify_timeout_s=900.0)
    summary, hints = profile_candidate(
        tmp_path / "c.py", settings, cancel=cancel, llm_code=True, reference=ref
    )
    (call,) = rec.calls
    assert call.timeout_s == 300.0 + 60  # min(verify timeout, 300) + 60
    assert call.llm_code and call.readable == (ref.resolve(),) and rec.cancels == [cancel]
    assert summary == "fused_relu 12.3 us, memory-bound (DRAM 87% of peak)"
    assert [h.split(" · ")[0] for h in hints] == ["fused_relu: A", "fused_relu: B"]


def test_the_cli_keeps_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from stitch_lsp.profile.command import _launch

    rec = _Recorder(_ok_run())
    monkeypatch.setattr(client, "run_worker", rec)
    run = _launch(ProfileRequest(path="/w/c.py", timeout_s=42.0), Settings())
    assert run.ok and rec.calls[0].timeout_s == 42.0 + 60 and rec.calls[0].env == {}


async def test_the_editor_keeps_its_limit() -> None:
    from stitch_lsp.server.features.profile import _run_worker

    seen: list[WorkerCall[Any]] = []

    async def run_worker(call: WorkerCall[Any]) -> WorkerReply[Any]:
        seen.append(call)
        return WorkerReply(result=_ok_run(), log_tail="", seconds=0.0)

    ls: Any = SimpleNamespace(settings=Settings(verify_timeout_s=77.0))
    ctx: Any = SimpleNamespace(device="cpu", run_worker=run_worker)
    run = await _run_worker(ls, ctx, ProfileRequest(path="/w/c.py"))
    assert run.ok and seen[0].timeout_s == 77.0 + 60 and seen[0].env == {}
    ctx.device = "cuda:0"
    await _run_worker(ls, ctx, ProfileRequest(path="/w/c.py"))
    assert seen[1].env == {"CUDA_VISIBLE_DEVICES": inventory().physical("cuda:0")}


def test_the_results_row_shows_the_summary_figures() -> None:
    """The results panel's row and the CLI/profile-command summary come from one projection."""
    from stitch_lsp.server.features.results import kernel_row

    k = _kernel()
    s = summarize(k, line=7)
    row = kernel_row(k, "candidate", 7)
    assert (row.name, row.duration_us, row.sm_pct, row.memory_pct, row.dram_gb_s) == (
        s.name,
        s.duration_us,
        s.sm_throughput_pct,
        s.memory_throughput_pct,
        s.dram_gb_per_s,
    )
    assert (row.occupancy_pct, row.registers, row.bottleneck, row.line) == (
        s.achieved_occupancy_pct,
        s.registers_per_thread,
        s.bottleneck,
        s.line,
    )
    assert row.arithmetic_intensity == s.arithmetic_intensity == 0.12
    assert (row.block, row.grid, row.gflops) == (256, 528, 300.0)
    assert row.duration_us == pytest.approx(12.345) and row.dram_gb_s == pytest.approx(2500.0)
    empty = kernel_row(ProfileResult(name="k"), "reference")
    assert (empty.duration_us, empty.block, empty.grid, empty.gflops) == (None, None, None, None)
