"""What the Verifier's worker receives and returns. JSON across the process boundary, no torch."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from stitch_lsp.models.base import Record
from stitch_lsp.models.findings import Finding


class VerifyStatus(str, Enum):
    passed = "passed"
    compile_error = "compile_error"
    incorrect = "incorrect"
    exploit = "exploit"
    runtime_error = "runtime_error"
    timeout = "timeout"
    no_gpu = "no_gpu"


class VerifyRequest(Record):
    """One verify job, written by the server side to a file the worker reads."""

    reference: str
    candidate: str
    device: str | None = Field(None, description="cuda:K inside the worker; None: cuda:0.")
    compile_only: bool = False
    trials: int = Field(5, ge=1)
    timing_trials: int = Field(20, ge=3)
    warmup: int = Field(3, ge=0)
    input_sets: int = Field(3, ge=1, description="Fresh get_inputs() sets timed in rotation.")
    allow_tf32: bool = False
    compare_compile: bool = Field(True, description="Also time torch.compile(Model).")
    extra_baselines: bool = Field(
        False,
        description="Also time the reference replayed under a CUDA graph and "
        'torch.compile(mode="reduce-overhead").',
    )
    timeline: bool = Field(True, description="Record a torch.profiler timeline of each model.")
    exploit_checks: bool = True
    seed: int = 42


class BuildInfo(Record):
    kind: str = Field(description="fastcuda | load_inline | load | none")
    name: str = ""
    seconds: float = 0.0
    cached: bool = False
    compile_only: bool = False
    arch: str | None = None
    command: list[str] = Field(default_factory=list)
    log_tail: str = ""


class TrialResult(Record):
    index: int
    passed: bool
    output: int = Field(0, description="Which output of a tuple this refers to.")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    numel: int = 0
    first_mismatch: list[int] | None = Field(None, description="Index of the first bad element.")
    expected: float | None = None
    actual: float | None = None
    unwritten: int = Field(0, description="Elements still holding the poison fill.")
    candidate_error_fp64: float | None = Field(
        None, description="Max abs error of the candidate from a float64 run (on a miss)."
    )
    reference_error_fp64: float | None = Field(
        None, description="Max abs error of the fp32 reference itself from float64 (on a miss)."
    )
    oracle_dtype: str | None = Field(
        None,
        description="The precision the reference ran in for the two errors above: float64, or "
        "float32 for a bf16/fp16 reference with no float64 run (an op without a float64 kernel).",
    )
    fp64_cleared: bool = Field(
        False,
        description="A bf16/fp16 miss passed: no further from the oracle's answer (float64, or "
        "float32 where oracle_dtype says so) than the reference is.",
    )
    message: str = ""


class PrecisionTrial(Record):
    """One output on one input set, against the reference run in float64."""

    inputs: str = Field(description="get_inputs, or the transform: signs, range, mantissa.")
    output: int = 0
    candidate_error: float = Field(description="Max abs error of the candidate from float64.")
    reference_error: float = Field(description="Max abs error of the fp32 reference.")
    candidate_tol_units: float = Field(
        description="max |y - y64| / (atol + rtol |y64|) of the candidate: 1 is the tolerance."
    )
    reference_tol_units: float
    ratio: float | None = Field(None, description="candidate / reference, in tolerance units.")
    downgrade: bool = False


class PrecisionReport(Record):
    """The float64 oracle: every trial, the thresholds it used, and what it skipped and why."""

    trials: list[PrecisionTrial] = Field(default_factory=list)
    factor: float = Field(description="Flag when the candidate is this many times further off.")
    floor: float = Field(description="... and at least this many tolerance units off.")
    skipped: list[str] = Field(default_factory=list)
    note: str | None = Field(None, description="Why the oracle did not run, when it did not.")


class CorrectnessReport(Record):
    passed: bool
    trials: list[TrialResult] = Field(default_factory=list)
    atol: float
    rtol: float
    dtype: str = ""
    tf32: bool = False
    inputs_mutated: bool = False
    precision: PrecisionReport | None = None
    output_scale: float | None = Field(
        None, description="max |y| of the reference's outputs; below atol, allclose says little."
    )


class TimingStats(Record):
    """Milliseconds over `n` timed runs (CUDA events, L2 flushed before each)."""

    median: float
    mean: float
    std: float
    min: float
    max: float
    n: int


class TimingReport(Record):
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    graph: TimingStats | None = Field(
        None,
        description="The reference replayed under a CUDA graph, input copy and fresh "
        "output included.",
    )
    compiled_ro: TimingStats | None = Field(
        None, description='torch.compile(mode="reduce-overhead") of the reference.'
    )
    candidate: TimingStats | None = None
    compile_note: str | None = Field(None, description="Why torch.compile was not timed.")
    graph_note: str | None = Field(None, description="Why the CUDA-graph column is missing.")
    compile_ro_note: str | None = Field(None, description="Why reduce-overhead is missing.")
    tf32: bool = Field(False, description="Whether a TF32 flag was on during any timed column.")
    floor_ms: float | None = Field(None, description="Roofline floor: bytes and FLOPs at peak.")
    floor_bandwidth: float | None = Field(None, description="Bytes/s the floor assumes.")
    floor_source: str | None = Field(None, description="Where that bandwidth comes from.")
    bytes_moved: int | None = Field(
        None, description="Input and output bytes: what any correct program reads and writes."
    )
    flops: int | None = Field(
        None,
        description="The least FLOPs any algorithm does (a convolution's direct count over its "
        "window size, as Winograd and FFT need less); the floor uses these.",
    )
    flops_direct: int | None = Field(None, description="FLOPs of the direct algorithms.")
    floor_peak: float | None = Field(None, description="FLOP/s the floor assumes.")
    floor_algebra: list[str] = Field(
        default_factory=list,
        description="Exact rewrites that lowered the floor's FLOPs (the heavy ops they remove), "
        "applied where the candidate beat the reference's floor.",
    )


class KernelShare(Record):
    name: str
    ms: float = Field(description="GPU time per forward.")
    calls: float = Field(description="Launches per forward.")
    share: float = Field(description="Share of the forward's GPU work.")


class Timeline(Record):
    """What the GPU did during one forward (torch.profiler / CUPTI, this process only)."""

    forwards: int = Field(description="Profiled forwards the figures are averaged over.")
    kernels: float = Field(description="Kernel launches per forward.")
    copies: float = Field(0.0, description="Memcpy and memset operations per forward.")
    streams: int = Field(1, description="Streams the forward's work ran on.")
    window_ms: float = Field(
        description="From the forward's first launch opportunity to the end of its last work."
    )
    busy_ms: float = Field(description="GPU time with at least one of its kernels running.")
    busy_fraction: float = Field(description="busy_ms / window_ms.")
    gaps: float = Field(description="Idle gaps per forward (longer than 1 us).")
    gap_ms: float = Field(description="Total idle time per forward.")
    max_gap_ms: float = 0.0
    median_gap_ms: float = 0.0
    host_ms: float | None = Field(
        None, description="Host time of one forward call (launch overhead), no profiler."
    )
    top: list[KernelShare] = Field(default_factory=list)
    note: str | None = None


class TimelineReport(Record):
    reference: Timeline | None = None
    candidate: Timeline | None = None
    note: str | None = Field(None, description="Why a timeline is missing.")


class Attribution(Record):
    """Who ran the candidate's GPU time in one forward: kernels it compiled itself, vendor
    libraries (cuBLAS, cuBLASLt, cuDNN, CUTLASS) or PyTorch's own kernels. A fused program may
    keep its GEMM or convolution on a vendor library; a candidate whose reference is that heavy
    op alone may not (StitchCUDA's "fake CUDA acceleration")."""

    gpu_ms: float = Field(0.0, description="GPU time per forward (kernels, copies, memsets).")
    own: float = Field(0.0, description="Share of it in kernels the candidate defines.")
    vendor: float = Field(0.0, description="Share in cuBLAS/cuBLASLt/cuDNN/CUTLASS kernels.")
    pytorch: float = Field(0.0, description="Share in PyTorch's kernels (ATen, Triton, cub).")
    other: float = Field(0.0, description="Copies, memsets and kernels of no known origin.")
    own_kernels: list[str] = Field(
        default_factory=list, description="`__global__` names the candidate's sources define."
    )
    top: dict[str, list[KernelShare]] = Field(
        default_factory=dict, description="The largest kernels of each class (own, vendor, ...)."
    )
    reference_ops: list[str] = Field(
        default_factory=list, description="Compute operators (ATen) the reference's forward ran."
    )
    heavy_alone: str | None = Field(
        None, description="gemm or conv when the reference is that heavy operator alone."
    )
    note: str | None = None


class ExploitFinding(Record):
    code: str = Field(description="stitch.exploit.<kind>")
    message: str
    evidence: dict[str, float | int | str] = Field(default_factory=dict)


class VerifyResult(Record):
    status: VerifyStatus
    message: str = ""
    reference: str = ""
    candidate: str = ""
    device: str | None = None
    gpu_name: str | None = None
    diagnostics: list[Finding] = Field(default_factory=list)
    build: BuildInfo | None = None
    correctness: CorrectnessReport | None = None
    timing: TimingReport | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_graph: float | None = None
    speedup_vs_compile_ro: float | None = None
    speedup_vs_best: float | None = Field(
        None,
        description="Against the fastest of the timed baselines (eager, CUDA graph, "
        "torch.compile, reduce-overhead).",
    )
    best_baseline: str | None = Field(None, description="Which baseline that was.")
    timeline: TimelineReport | None = None
    attribution: Attribution | None = Field(
        None, description="Own, vendor and PyTorch shares of the candidate's GPU time."
    )
    exploits: list[ExploitFinding] = Field(default_factory=list)
    log_tail: str = ""
    wall_seconds: float = 0.0
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    phase: str = Field("start", description="Last phase the worker reached.")
    sandbox: str = Field("", description="'bwrap' when the code ran confined; otherwise why not.")

    @property
    def ok(self) -> bool:
        return self.status is VerifyStatus.passed
