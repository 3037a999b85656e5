"""What the Verifier's worker receives and returns. JSON across the process boundary, no torch."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from stitch_lsp.models.findings import Finding


class VerifyStatus(str, Enum):
    passed = "passed"
    compile_error = "compile_error"
    incorrect = "incorrect"
    exploit = "exploit"
    runtime_error = "runtime_error"
    timeout = "timeout"
    no_gpu = "no_gpu"


class VerifyRequest(BaseModel):
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
    exploit_checks: bool = True
    seed: int = 42


class BuildInfo(BaseModel):
    kind: str = Field(description="fastcuda | load_inline | load | none")
    name: str = ""
    seconds: float = 0.0
    cached: bool = False
    compile_only: bool = False
    arch: str | None = None
    command: list[str] = Field(default_factory=list)
    log_tail: str = ""


class TrialResult(BaseModel):
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
    message: str = ""


class CorrectnessReport(BaseModel):
    passed: bool
    trials: list[TrialResult] = Field(default_factory=list)
    atol: float
    rtol: float
    dtype: str = ""
    tf32: bool = False
    inputs_mutated: bool = False


class TimingStats(BaseModel):
    """Milliseconds over `n` timed runs (CUDA events, L2 flushed before each)."""

    median: float
    mean: float
    std: float
    min: float
    max: float
    n: int


class TimingReport(BaseModel):
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    candidate: TimingStats | None = None
    compile_note: str | None = Field(None, description="Why torch.compile was not timed.")
    floor_ms: float | None = Field(None, description="Roofline floor: bytes and FLOPs at peak.")
    bytes_moved: int | None = None
    flops: int | None = None


class ExploitFinding(BaseModel):
    code: str = Field(description="stitch.exploit.<kind>")
    message: str
    evidence: dict[str, float | int | str] = Field(default_factory=dict)


class VerifyResult(BaseModel):
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
    exploits: list[ExploitFinding] = Field(default_factory=list)
    log_tail: str = ""
    wall_seconds: float = 0.0
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    phase: str = Field("start", description="Last phase the worker reached.")

    @property
    def ok(self) -> bool:
        return self.status is VerifyStatus.passed
