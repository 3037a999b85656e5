"""Records of the agent loop that cross processes: the planner worker's analysis, plans, attempts.

The planner worker (torch) writes `ReferenceAnalysis` as JSON; the loop (no torch) reads it.
Attempts, rubrics and run results go to the CLI, the server and the trajectory files.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field

from stitch_lsp.models.base import Record
from stitch_lsp.models.findings import Finding
from stitch_lsp.models.verify import Timeline


class CoderStage(str, Enum):
    """What the Coder is asked to do (StitchCUDA's four skills)."""

    draft = "draft"
    repair_compile = "repair_compile"
    repair_correctness = "repair_correctness"
    optimize_performance = "optimize_performance"


# ---------------------------------------------------------------- planner analysis (torch worker)


class HardwareSpec(Record):
    """The GPU the plan targets; peak figures feed the roofline floor."""

    name: str
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_gib: float | None = None
    bandwidth_tb_s: float = Field(description="Sustained DRAM bandwidth used for the byte floor.")
    fp32_tflops: float = Field(description="Peak non-tensor-core FP32 throughput.")
    tf32_tflops: float | None = None
    source: str = Field(description="Where the figures come from: measured, datasheet, assumed.")
    present: bool = Field(False, description="True when this GPU was seen by the worker.")


class TensorMeta(Record):
    shape: list[int]
    dtype: str


class OpCost(Record):
    """One node of the reference graph with its work and its lower bound on the target GPU."""

    node: str
    op: str = Field(description="Module type or function name, e.g. Linear, relu, mul.")
    kind: str = Field(description="fx opcode: call_module, call_function, call_method.")
    outputs: list[TensorMeta] = Field(default_factory=list)
    flops: float = 0.0
    bytes: float = Field(0.0, description="Bytes read and written if this op ran alone.")
    floor_ms: float = 0.0
    bound: Literal["memory", "compute"] = "memory"
    measured_ms: float | None = Field(None, description="GPU time of this node, when profiled.")
    line: int | None = Field(None, description="The reference's source line that spells this op.")


class KernelTime(Record):
    name: str
    device_ms: float
    calls: int


class PlannerRequest(Record):
    """What the planner's torch worker analyses: one reference file, optionally timed on the GPU."""

    reference: str
    profile: bool = False


class ScaffoldInput(Record):
    name: str
    meta: TensorMeta | None = Field(None, description="None when the input is not one tensor.")


class ScaffoldStatement(Record):
    """One op of the flattened forward, as torch.fx writes it (`conv1 = self.conv1(x)`)."""

    node: str = Field(description="The fx node name, which is also the variable it assigns.")
    code: str
    args: list[str] = Field(default_factory=list, description="The fx nodes it reads.")
    line: int | None = None
    meta: TensorMeta | None = Field(None, description="Its value, when that is one tensor.")


class ForwardScaffold(Record):
    """The reference as a runnable all-PyTorch ModelNew whose forward names every op.

    Partial programs start from it: the statements of a fusion group are the lines a subtask
    replaces with CUDA. The worker checks that it builds the reference's parameters and gives
    its output shapes (on fake tensors) before it hands it out.
    """

    prelude: str = Field(
        description="Imports, helpers and `class ModelNew` with Model's constructor, verbatim."
    )
    signature: str = Field(description="The forward's `def` line, e.g. 'def forward(self, x):'.")
    inputs: list[ScaffoldInput] = Field(default_factory=list)
    statements: list[ScaffoldStatement] = Field(default_factory=list)
    returns: str = Field(description="The forward's return statement.")
    output_args: list[str] = Field(default_factory=list, description="The nodes it returns.")


class ReferenceAnalysis(Record):
    """Deterministic facts about the reference, computed in a torch worker."""

    module: str = "Model"
    graph_method: str = Field("", description="fx, module-hooks, or none when tracing failed.")
    inputs: list[TensorMeta] = Field(default_factory=list)
    outputs: list[TensorMeta] = Field(default_factory=list)
    parameter_bytes: float = 0.0
    ops: list[OpCost] = Field(default_factory=list)
    total_flops: float = 0.0
    unfused_bytes: float = 0.0
    fused_bytes: float = Field(0.0, description="Inputs + parameters + outputs: perfect fusion.")
    fused_floor_ms: float = 0.0
    unfused_floor_ms: float = 0.0
    hardware: HardwareSpec
    eager_ms: float | None = None
    kernels: list[KernelTime] = Field(default_factory=list)
    timeline: Timeline | None = Field(
        None, description="What the GPU does during one forward of the reference (profiled)."
    )
    scaffold: ForwardScaffold | None = Field(
        None, description="The forward flattened by torch.fx, for partial programs (fx only)."
    )
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- plans


class PlannedGroup(Record):
    """One fusion group of a plan: the reference ops the Planner means one kernel to cover
    (not the builtin compiler's `CompiledGroup`, which describes code already generated)."""

    name: str
    ops: list[str] = Field(description="fx node names (or op names) fused into one kernel.")
    anchor: str | None = Field(None, description="The heavy op the group is built around.")
    rationale: str = ""


class Plan(Record):
    """The Planner's answer (StitchCUDA's strict-JSON plan), optionally written by an LLM."""

    summary: str
    fusion_groups: list[PlannedGroup] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)
    expected_bottlenecks: list[str] = Field(default_factory=list)
    correctness_risks: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    avoid: list[str] = Field(
        default_factory=list,
        description="Strategies that failed earlier; a replan must not repeat them.",
    )
    revision: int = 0
    source: Literal["analysis", "llm", "analysis+llm"] = "analysis"
    analysis: ReferenceAnalysis | None = None


# ---------------------------------------------------------------- subtasks (step by step)


class SubtaskOp(Record):
    node: str
    op: str
    shapes: list[list[int]] = Field(default_factory=list, description="Its output shapes.")
    line: int | None = None


class Subtask(Record):
    """One step of a step-by-step run: a fusion group (or a few adjacent ones) to write in CUDA
    while the rest of the program stays PyTorch."""

    index: int = Field(ge=1, description="1-based, in forward order.")
    total: int
    groups: list[str] = Field(description="The plan's fusion groups it covers, e.g. ['k3'].")
    label: str = Field(description="Short name from its ops, e.g. 'conv+bn+relu'.")
    ops: list[SubtaskOp] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list, description="Values it reads from outside.")
    outputs: list[str] = Field(default_factory=list, description="Values used after it.")
    lines: list[int] = Field(default_factory=list, description="Reference source lines.")
    bottleneck: str = Field("", description="The expected bottleneck, from the analysis.")

    @property
    def group(self) -> str:
        return "+".join(self.groups)

    @property
    def title(self) -> str:
        return f"Subtask {self.index}/{self.total}: {self.label}"

    def ref(self) -> SubtaskRef:
        return SubtaskRef(
            index=self.index,
            total=self.total,
            group=self.group,
            label=self.label,
            ops=[o.node for o in self.ops],
        )


class SubtaskRef(Record):
    """What an attempt record says about its subtask."""

    index: int
    total: int
    group: str
    label: str
    ops: list[str] = Field(default_factory=list)
    attempt: int | None = Field(None, description="The attempt's number within the subtask.")
    budget: int | None = Field(None, description="The subtask's attempt budget.")


SubtaskStatus = Literal["done", "seeded", "covered", "failed", "stopped", "not_reached"]


class SubtaskOutcome(Record):
    """How one subtask ended: done (the Coder's code passed), seeded (the builtin generator's
    code passed), covered (the builtin's whole program already did it), failed (left in PyTorch),
    stopped (the run ended during it), not_reached (the run ended first)."""

    subtask: Subtask
    status: SubtaskStatus = "not_reached"
    attempts: list[int] = Field(default_factory=list, description="Attempt indices it used.")
    accepted: int | None = None
    message: str = ""


# ---------------------------------------------------------------- verification as the loop sees it


VerifyStatus = Literal[
    "passed",
    "compiled",
    "compile_error",
    "incorrect",
    "exploit",
    "runtime_error",
    "timeout",
    "no_gpu",
    "no_code",
    "rejected",
]


class Verdict(Record):
    """The Verifier's answer for one candidate, reduced to what the loop and the Coder use.

    `compiled` means the compile-only stage passed (no GPU): correctness and speed are unknown.
    `rejected` means the static checks found an error (e.g. the heavy work left in PyTorch).
    """

    status: VerifyStatus
    message: str = ""
    diagnostics: list[Finding] = Field(default_factory=list)
    correctness: str | None = Field(None, description="Summary of the mismatch, when incorrect.")
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    eager_ms: float | None = None
    candidate_ms: float | None = None
    speedup_vs_best: float | None = Field(
        None, description="Against the fastest baseline timed (eager, CUDA graph, compile, ...)."
    )
    best_baseline: str | None = None
    timeline: str | None = Field(
        None, description="The candidate's and the reference's per-forward timelines, as text."
    )
    compile_s: float | None = None
    custom_share: float | None = Field(
        None, description="Share of the candidate's GPU time in its own kernels (attribution)."
    )
    attribution: str | None = Field(
        None, description="`custom kernels: 18% of GPU time (vendor 80%: ...)`, as text."
    )
    profile_hints: list[str] = Field(default_factory=list)
    profile_summary: str | None = None

    @property
    def compiled_ok(self) -> bool:
        return self.status in {
            "passed",
            "compiled",
            "incorrect",
            "exploit",
            "runtime_error",
            "rejected",
        }

    @property
    def correct(self) -> bool | None:
        """True/False when checked on a GPU; None when only compiled."""
        if self.status == "passed":
            return True
        if self.status == "compiled":
            return None
        return False


# ---------------------------------------------------------------- rubric and attempts


class RubricItem(Record):
    score: int = Field(ge=1, le=5)
    reasons: list[str] = Field(default_factory=list)


class Rubric(Record):
    """StitchCUDA's four rubric items, 1 to 5 each."""

    anti_hacking: RubricItem
    engineering: RubricItem
    coverage: RubricItem
    compliance: RubricItem
    judge: Literal["rules", "rules+llm"] = "rules"
    major_hack: bool = False

    @property
    def total(self) -> int:
        return (
            self.anti_hacking.score
            + self.engineering.score
            + self.coverage.score
            + self.compliance.score
        )


class Attempt(Record):
    index: int = Field(
        ge=0, description="0: the version the run started from (not a Coder attempt)."
    )
    stage: CoderStage
    plan_revision: int = 0
    coder: str
    code: str | None = None
    finish_reason: str | None = None
    verdict: Verdict
    rubric: Rubric | None = None
    rubric_total: int | None = None
    reward: float | None = Field(None, description="None when correctness was not checked.")
    accepted: bool = False
    seconds: float = 0.0
    phase: Literal["single", "subtask", "stitch", "whole"] = Field(
        "single",
        description="single: a one-shot run; subtask: one group of a step-by-step run; stitch: "
        "the first whole-program attempt after the subtasks; whole: the optimizations after it.",
    )
    subtask: SubtaskRef | None = None
    partial: bool = Field(
        False, description="The program leaves planned groups in PyTorch (a subtask's step)."
    )


class RunResult(Record):
    """What a generate run produced; the CLI prints it and the editor shows it."""

    reference: str
    verify_mode: Literal["full", "compile"]
    coder: str
    attempts: list[Attempt] = Field(default_factory=list)
    best_index: int | None = None
    output: str | None = None
    stopped: Literal[
        "target_met",
        "compiled",  # compile-only: an attempt built and passed the static checks, nothing measured
        "budget",
        "cancelled",
        "endpoint",
        "builtin_done",
        "error",
        "no_gpu",
    ]
    message: str = ""
    replans: int = 0
    trajectory_file: str | None = None
    baseline_speedup: float | None = Field(
        None, description="Of the version an optimize run began from."
    )
    subtasks: list[SubtaskOutcome] = Field(
        default_factory=list, description="A step-by-step run's subtasks, in order."
    )
    notes: list[str] = Field(default_factory=list, description="How the run adapted its plan.")

    @property
    def best(self) -> Attempt | None:
        for a in self.attempts:
            if a.index == self.best_index:
                return a
        return None

    @property
    def ok(self) -> bool:
        return self.output is not None
