"""Records of an Nsight Compute profile that cross the worker/server boundary as JSON.

Paths inside these records are the paths the report recorded (often a build folder on another
machine); `stitch_lsp.profile.mapping` turns them into workspace files and lines.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, RootModel

from stitch_lsp.models.base import Record, WireModel


class Bottleneck(str, Enum):
    memory = "memory"
    compute = "compute"
    latency = "latency"
    launch = "launch"  # too little work: small grid, under a wave, or a few microseconds
    unknown = "unknown"


class RuleResult(Record):
    """One ncu rule's verdict for one kernel (a rule may give several)."""

    rule_id: str
    name: str = ""
    section: str = ""
    title: str = ""
    message: str
    type: int = Field(description="1 info, 2 optimization, 3 warning, 4 error (ncu's MsgType)")
    speedup_pct: float | None = Field(None, description="ncu's estimated speedup, in percent")
    speedup_type: str | None = Field(None, description="global or local")
    # Source lines the rule's tables point at: (report path, 1-based line).
    locations: list[tuple[str, int]] = Field(default_factory=list)


class SourceMarker(Record):
    """A rule message that ncu attached to a source line (kind 1) or to a SASS address (kind 0)."""

    rule_id: str
    section: str = ""
    message: str
    type: int
    path: str | None = None
    line: int | None = Field(None, description="1-based; for SASS markers, the line of the address")
    address: int | None = None


class StallReason(Record):
    name: str
    samples: float
    pct: float = Field(description="share of all stall samples of the kernel")


class LineHotspot(Record):
    """Per-source-line counters summed over the line's instructions (SourceCounters)."""

    path: str
    line: int
    stall_samples: float = 0.0
    stall_pct: float = 0.0
    top_stall: str | None = None
    excessive_sectors: float = Field(
        0.0, description="global-memory L2 sectors beyond the ideal (uncoalesced access)"
    )
    excessive_shared_wavefronts: float = Field(
        0.0, description="shared-memory wavefronts beyond the ideal (bank conflicts)"
    )


class Occupancy(Record):
    theoretical_pct: float | None = None
    achieved_pct: float | None = None
    limiter: str | None = Field(
        None, description="registers, shared memory, warps, blocks or barriers"
    )
    block_limits: dict[str, float] = Field(default_factory=dict)


class LaunchConfig(Record):
    block: tuple[int, int, int] = (0, 0, 0)
    grid: tuple[int, int, int] = (0, 0, 0)
    block_size: int = 0
    grid_size: int = 0
    registers_per_thread: int | None = None
    shared_mem_static: int | None = None
    shared_mem_dynamic: int | None = None
    waves_per_sm: float | None = None
    sm_count: int | None = None


class Roofline(Record):
    """Where the kernel sits against the FP32/FP64 roofline from DRAM bytes and FLOPs."""

    achieved_flops: float
    peak_flops: float
    dram_bytes_per_s: float
    peak_dram_bytes_per_s: float
    arithmetic_intensity: float | None = Field(None, description="FLOP per DRAM byte")
    ridge_point: float | None = Field(None, description="FLOP per byte where the roofs meet")
    bound: str = Field(description="'memory' left of the ridge, 'compute' right of it")
    pct_of_roof: float | None = Field(None, description="achieved FLOP/s over the roof at this AI")


class ProfileResult(Record):
    """One profiled kernel launch."""

    name: str
    demangled: str = ""
    mangled: str = ""
    range_idx: int = 0
    action_idx: int = 0
    device: str | None = None
    duration_ns: float | None = None
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    dram_bytes_per_s: float | None = None
    occupancy: Occupancy = Field(default_factory=Occupancy)
    launch: LaunchConfig = Field(default_factory=LaunchConfig)
    stalls: list[StallReason] = Field(default_factory=list, description="largest first")
    bottleneck: Bottleneck = Bottleneck.unknown
    bottleneck_reason: str = ""
    roofline: Roofline | None = None
    rules: list[RuleResult] = Field(default_factory=list)
    markers: list[SourceMarker] = Field(default_factory=list)
    hotspots: list[LineHotspot] = Field(default_factory=list, description="hottest first")
    # Where the kernel's code lives according to its instructions' line info.
    source_path: str | None = None
    source_first_line: int | None = None


class ProfileReport(Record):
    """Everything read from one `.ncu-rep` file."""

    report_path: str
    kernels: list[ProfileResult] = Field(default_factory=list)
    # Sources embedded with --import-source yes: report path -> text.
    sources: dict[str, str] = Field(default_factory=dict)


class ProfileErrorKind(str, Enum):
    no_gpu = "no_gpu"
    no_ncu = "no_ncu"
    no_permission = "no_permission"
    build_failed = "build_failed"
    target_failed = "target_failed"
    no_kernels = "no_kernels"
    timeout = "timeout"
    failed = "failed"


class ProfileRequest(Record):
    """What the profile worker is asked to do."""

    kind: Literal["profile"] = "profile"
    path: str = Field(description="a .py file (KernelBench format) or a .cu file with main()")
    class_name: str | None = Field(
        None, description="ModelNew or Model; default: ModelNew if present"
    )
    kernel_regex: str | None = Field(
        None, description="ncu -k filter; default: the file's own kernels"
    )
    sections: list[str] = Field(default_factory=list)
    full_set: bool = False
    launch_count: int = Field(8, ge=1)
    ncu_path: str = "ncu"
    python: str | None = Field(None, description="python with torch for .py targets")
    report_dir: str | None = Field(None, description="where to keep the .ncu-rep; default: temp")
    timeout_s: float = 600.0
    nvcc_flags: list[str] = Field(default_factory=list)
    reference: str | None = Field(
        None,
        description="a KernelBench reference .py whose `Model` is profiled as well (all its "
        "kernels), so that the candidate's kernels can be shown beside the reference's",
    )


class ReportRequest(Record):
    """Read an existing `.ncu-rep` (no GPU, no user code): the profile worker's other job."""

    kind: Literal["read"] = "read"
    report: str
    ncu_path: str = Field("ncu", description="helps find ncu_report when its wheel is missing")


class ProfileWorkerRequest(
    RootModel[Annotated[ProfileRequest | ReportRequest, Field(discriminator="kind")]]
):
    """Either job of the profile worker, told apart by `kind`."""


class ProfileRun(Record):
    """The worker's answer: a report, or why there is none."""

    ok: bool
    error_kind: ProfileErrorKind | None = None
    error: str | None = None
    report_path: str | None = None
    report: ProfileReport | None = None
    command: list[str] = Field(default_factory=list)
    wall_s: float = 0.0
    ncu_s: float = 0.0
    build_s: float = 0.0
    log_tail: str = ""
    reference_report: ProfileReport | None = Field(
        None, description="the reference's kernels, when the request named a reference"
    )
    reference_error: str | None = Field(None, description="why the reference has no report")


class KernelSummary(WireModel):
    """The per-kernel record in `stitch-lsp profile --json` (`kernels`, snake_case) and in the
    editor's profile command results (camelCase)."""

    name: str
    path: str | None = None
    line: int | None = None
    duration_us: float | None = None
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_gb_per_s: float | None = None
    theoretical_occupancy_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    occupancy_limiter: str | None = None
    registers_per_thread: int | None = None
    shared_mem_per_block: int | None = None
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    waves_per_sm: float | None = None
    top_stalls: list[str]
    bottleneck: str
    bottleneck_reason: str
    roofline_bound: str | None = None
    arithmetic_intensity: float | None = None
    hints: list[str]
