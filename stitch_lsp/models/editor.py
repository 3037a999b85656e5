"""Messages that only the editor's views use: the jobs list and the results panel.

They cross to the client as JSON in camelCase (the client is TypeScript); Python reads them in
snake_case.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stitch_lsp.models.base import WireModel

JOBS_METHOD = "stitch/jobs"
"""Request (client -> server) and notification (server -> client): the running and queued jobs."""

RESULTS_METHOD = "stitch/results"
"""Request: everything measured for one file (attempts, verify, profile, roofline)."""

CANCEL_COMMAND = "stitch.cancel"
"""`workspace/executeCommand`: [] cancels every job, [{id}] one job, [{uri}] a file's jobs."""


# ---- jobs --------------------------------------------------------------------------------------


class JobView(WireModel):
    id: int
    kind: str = Field(description="verify, profile, generate, optimize, ...")
    title: str
    uri: str | None = None
    file: str | None = Field(None, description="The file's name, for a short label.")
    device: str | None = Field(None, description="cuda:K, or None for a CPU job.")
    state: Literal["queued", "running"]
    stage: str = Field("", description="The last progress message.")
    submitted_at: float = Field(description="Epoch seconds.")
    started_at: float | None = None
    elapsed_s: float = Field(0.0, description="Seconds since it started (or was queued).")


class JobsParams(WireModel):
    jobs: list[JobView] = Field(default_factory=list)


# ---- results panel -----------------------------------------------------------------------------


class RubricItemView(WireModel):
    name: str = Field(description="anti_hacking, engineering, coverage or compliance.")
    score: int
    reasons: list[str] = Field(default_factory=list)


class AttemptRow(WireModel):
    """One attempt of a generate/optimize run, from its trajectory record."""

    run_id: str
    attempt: int
    stage: str
    status: str
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    rubric: int | None = Field(None, description="Rubric total, 4 to 20.")
    reward: float | None = None
    correct: bool | None = None
    accepted: bool = False
    this_file: bool = Field(False, description="This attempt's code is the file being shown.")
    created: str | None = None
    message: str = ""
    rubric_items: list[RubricItemView] = Field(
        default_factory=list, description="The rubric's four items with their reasons."
    )


class PlanGroupView(WireModel):
    """One fusion group of the plan, with the reference line of each op where it is known."""

    name: str
    ops: list[str] = Field(default_factory=list)
    lines: list[int | None] = Field(default_factory=list, description="Per op, 1-based.")
    rationale: str = ""


class PlanView(WireModel):
    """The plan the run's attempts were written to (from their trajectory records)."""

    run_id: str
    revision: int = 0
    summary: str = ""
    groups: list[PlanGroupView] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)


class KernelShareView(WireModel):
    name: str
    ms: float
    calls: float
    share: float


class TimelineView(WireModel):
    """Per-forward totals of the GPU's work (the verifier's timeline; no launch positions)."""

    forwards: int
    kernels: float
    window_ms: float
    busy_ms: float
    busy_fraction: float
    gaps: float
    gap_ms: float
    max_gap_ms: float = 0.0
    host_ms: float | None = None
    streams: int = 1
    top: list[KernelShareView] = Field(default_factory=list)


class TimelinesView(WireModel):
    reference: TimelineView | None = None
    candidate: TimelineView | None = None
    note: str | None = Field(None, description="Why a side has no timeline.")


class VerifySummary(WireModel):
    status: str
    title: str
    message: str = ""
    stale: bool = Field(False, description="The file changed since it was verified.")
    compile_only: bool = False
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    eager_ms: float | None = None
    compiled_ms: float | None = None
    candidate_ms: float | None = None
    gpu: str | None = None
    max_abs_error: float | None = None
    timeline: TimelinesView | None = None


class KernelRow(WireModel):
    """One profiled kernel: the ncu table's row and its roofline point."""

    name: str
    side: Literal["candidate", "reference"]
    duration_us: float | None = None
    sm_pct: float | None = None
    memory_pct: float | None = None
    dram_gb_s: float | None = None
    occupancy_pct: float | None = None
    registers: int | None = None
    block: int | None = None
    grid: int | None = None
    bottleneck: str = "unknown"
    arithmetic_intensity: float | None = Field(None, description="FLOP per DRAM byte.")
    gflops: float | None = Field(None, description="Achieved GFLOP/s.")
    line: int | None = Field(None, description="1-based line of the kernel in this file.")


class Roofs(WireModel):
    """The GPU's roofs: `agents.hardware`'s figures for a known GPU (the one source every view
    and the Planner use; the H200's bandwidth is measured), ncu's metrics for another."""

    peak_gflops: float = Field(description="FP32 (FFMA) peak, GFLOP/s.")
    peak_gb_s: float = Field(description="DRAM peak, GB/s.")
    source: str = Field(description="Where the figures come from, as a sentence.")
    gpu: str | None = None
    ncu_peak_gb_s: float | None = Field(
        None, description="ncu's own DRAM peak from the report, when the roofs are not ncu's."
    )


class ResultsResponse(WireModel):
    uri: str
    file: str
    role: Literal["reference", "candidate", "other"]
    reference: str | None = Field(None, description="The reference file's path, if known.")
    attempts: list[AttemptRow] = Field(default_factory=list)
    verify: VerifySummary | None = None
    kernels: list[KernelRow] = Field(default_factory=list)
    roofs: Roofs | None = None
    profile_stale: bool = False
    report: str | None = Field(None, description="The .ncu-rep the kernels come from.")
    reference_label: str | None = Field(
        None, description="The reference as shown: relative to the workspace where inside it."
    )
    report_label: str | None = Field(None, description="The report as shown, likewise.")
    plan: PlanView | None = None
    profiler: str | None = Field(
        None, description="Why nothing can be profiled here (no GPU, no ncu); None when it can."
    )
    notes: list[str] = Field(default_factory=list, description="What is missing, and why.")
