"""The Coder: turns a plan and the Verifier's feedback into a candidate file.

Two implementations share one interface: `LLMCoder` (any OpenAI-compatible endpoint) and
`BuiltinCoder` (the deterministic generator of `stitch_lsp.compiler`). Both record the
prompt they answer, so every attempt's trajectory is a chat transcript whatever wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from stitch_lsp.agents.extract import extract_code
from stitch_lsp.agents.llm import ChatClient, EndpointError
from stitch_lsp.agents.partial import find_block
from stitch_lsp.agents.planner import describe_hardware, describe_plan
from stitch_lsp.agents.prompts import render
from stitch_lsp.agents.subtasks import describe as describe_subtask
from stitch_lsp.models.agents import Attempt, CoderStage, Plan, Subtask, Verdict

_MAX_DIAGNOSTICS = 20


@dataclass
class SubtaskContext:
    """Where a step-by-step run stands when it asks for one subtask's code."""

    subtask: Subtask
    program: str | None  # the current partial program (None: no scaffold, start from scratch)
    attempt: int  # within the subtask
    budget: int
    in_cuda: list[str] = field(default_factory=list)  # labels of the groups already in CUDA
    in_pytorch: list[str] = field(default_factory=list)  # groups whose subtask failed
    seed: str | None = None  # the builtin generator's code for this group's subproblem
    seed_feedback: str | None = None  # what the Verifier said when it was spliced in as it was


@dataclass
class StitchContext:
    """The whole-program step after the subtasks: what each group became."""

    in_cuda: list[str]
    in_pytorch: list[str]


@dataclass
class CoderRequest:
    stage: CoderStage
    attempt: int
    reference_name: str
    reference: str
    plan: Plan
    previous: Attempt | None = None  # what to repair or optimize
    seed: str | None = None  # a deterministic draft the LLM may start from
    target_speedup: float = 1.0
    subtask: SubtaskContext | None = None
    stitch: StitchContext | None = None


@dataclass
class CoderReply:
    messages: list[dict[str, str]]
    reply: str
    code: str | None
    problem: str | None = None  # why there is no code
    finish_reason: str | None = None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class Coder(Protocol):
    name: str
    #: True when the coder can act on feedback (repair, optimize); the builtin generator cannot.
    iterative: bool

    def write(self, request: CoderRequest) -> CoderReply: ...


def format_feedback(verdict: Verdict) -> str:
    """Feedback for the Coder: errors with lines, the mismatch, timings, profile hints."""
    lines: list[str] = []
    if verdict.message and verdict.status != "passed":  # a pass says only "correct"
        lines.append(verdict.message)
    ranked = sorted(verdict.diagnostics, key=lambda d: (d.severity.value != "error", d.line))
    for d in ranked[:_MAX_DIAGNOSTICS]:
        lines.append(f"- line {d.line}:{d.column} {d.severity.value} [{d.code}] {d.message}")
    if len(verdict.diagnostics) > _MAX_DIAGNOSTICS:
        lines.append(f"- ... and {len(verdict.diagnostics) - _MAX_DIAGNOSTICS} more")
    if verdict.correctness:
        lines.append(f"Correctness: {verdict.correctness}")
    if verdict.eager_ms is not None and verdict.candidate_ms is not None:
        timing = (
            f"Timing: yours {verdict.candidate_ms:.4f} ms, PyTorch eager {verdict.eager_ms:.4f} ms"
        )
        if verdict.speedup is not None:
            timing += f" (speedup {verdict.speedup:.2f}x"
            if verdict.speedup_vs_compile is not None:
                timing += f"; {verdict.speedup_vs_compile:.2f}x vs torch.compile"
            if verdict.speedup_vs_best is not None and verdict.best_baseline not in (None, "eager"):
                timing += f"; {verdict.speedup_vs_best:.2f}x vs the best baseline"
                timing += f" ({verdict.best_baseline})"
            timing += ")"
        lines.append(timing)
    if verdict.timeline:
        lines.append("Timeline per forward (torch.profiler):")
        lines.extend(verdict.timeline.splitlines())
    if verdict.profile_summary:
        lines.append(f"Profile: {verdict.profile_summary}")
    lines += [f"- profiler: {h}" for h in verdict.profile_hints[:8]]
    return "\n".join(lines) or "(no details)"


def build_messages(req: CoderRequest) -> list[dict[str, str]]:
    analysis = req.plan.analysis
    hw = analysis.hardware if analysis else None
    system = render(
        "coder_system",
        gpu=hw.name if hw else describe_hardware(None).split(",")[0],
        cc=(hw.compute_capability if hw else None) or "9.0",
    )
    common = {
        "reference_name": req.reference_name,
        "reference": req.reference.rstrip(),
        "plan_revision": req.plan.revision,
        "plan": describe_plan(req.plan),
    }
    prev = req.previous
    if req.subtask is not None and (
        req.stage is CoderStage.draft or prev is None or prev.code is None
    ):
        user = _subtask_draft(req.subtask, common)
    elif req.stitch is not None and prev is not None and prev.code is not None:
        user = _stitch(req, req.stitch, prev, common)
    elif req.stage is CoderStage.draft or prev is None or prev.code is None:
        seed = ""
        if req.seed:
            seed = (
                "A deterministic generator produced this version; you may start from it:\n"
                f"```python\n{req.seed.rstrip()}\n```"
            )
        user = render("draft", seed=seed, **common)
    elif req.stage is CoderStage.repair_compile:
        user = render(
            "repair_compile",
            attempt=prev.index,
            diagnostics=format_feedback(prev.verdict),
            code=prev.code.rstrip(),
            **common,
        )
    elif req.stage is CoderStage.repair_correctness:
        user = render(
            "repair_correctness",
            attempt=prev.index,
            status=prev.verdict.status,
            feedback=format_feedback(prev.verdict),
            code=prev.code.rstrip(),
            **common,
        )
    else:
        speed = prev.verdict.speedup
        user = render(
            "optimize_performance",
            attempt=prev.index,
            speedup=f"{speed:.2f}x" if speed is not None else "an unmeasured speed",
            target=f"{req.target_speedup:g}",
            feedback=format_feedback(prev.verdict),
            code=prev.code.rstrip(),
            **common,
        )
    if req.subtask is not None and req.stage is not CoderStage.draft:
        user = _subtask_preamble(req.subtask) + "\n" + user
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _others(ctx: SubtaskContext) -> str:
    parts = []
    if ctx.in_cuda:
        parts.append(f"already in CUDA and verified: {', '.join(ctx.in_cuda)}")
    if ctx.in_pytorch:
        parts.append(f"left in PyTorch after their subtask failed: {', '.join(ctx.in_pytorch)}")
    parts.append("every later group stays PyTorch until its own subtask")
    return "; ".join(parts)


def _subtask_draft(ctx: SubtaskContext, common: dict[str, object]) -> str:
    st = ctx.subtask
    if ctx.program is not None and find_block(ctx.program, st.group) is None:
        intro = (
            f"Write this subtask's ops in CUDA inside the current partial program, whose other "
            f"parts stay as they are ({_others(ctx)}); everything not yet in CUDA is computed "
            "as the reference does. Mark the block you write with "
            f"`# >>> stitch {st.group}` before it and `# <<< stitch {st.group}` after it, keep "
            "ModelNew's constructor and parameters, and keep every name that later code uses "
            "defined. The Verifier checks the whole program against the full reference."
        )
        current = f"The current partial program:\n```python\n{ctx.program.rstrip()}\n```"
    elif ctx.program is not None:
        intro = (
            f"Write group {st.group} in CUDA inside the current partial program: replace the "
            f"PyTorch statements between `# >>> stitch {st.group}` and `# <<< stitch {st.group}` "
            "with your kernels. Keep both markers, keep the other blocks as they are "
            f"({_others(ctx)}), keep ModelNew's constructor and parameters, and keep every name "
            "that later code uses defined. The Verifier checks the whole program against the "
            "full reference, so its outputs must still match."
        )
        current = f"The current partial program:\n```python\n{ctx.program.rstrip()}\n```"
    else:
        intro = (
            f"Write ModelNew with this subtask's ops in CUDA and every other op in PyTorch, "
            f"computed exactly as the reference does ({_others(ctx)}). Mark the block you write "
            f"with `# >>> stitch {st.group}` before it and `# <<< stitch {st.group}` after it. "
            "The Verifier checks the whole program against the full reference."
        )
        current = "There is no partial program yet: start from the reference."
    seed = ""
    if ctx.seed:
        seed = (
            "\nA deterministic generator wrote this group as a standalone module (its forward "
            "takes the group's inputs and returns what later code uses); you may adapt its "
            f"kernels:\n```python\n{ctx.seed.rstrip()}\n```"
        )
        if ctx.seed_feedback:
            seed += (
                "\nSpliced into the block as it is, it did not pass; the Verifier said:\n"
                + ctx.seed_feedback
            )
    return render(
        "subtask",
        title=st.title,
        intro=intro,
        subtask=describe_subtask(st),
        current=current,
        seed=seed,
        **common,
    )


def _subtask_preamble(ctx: SubtaskContext) -> str:
    return render(
        "subtask_context",
        title=ctx.subtask.title,
        attempt=ctx.attempt,
        budget=ctx.budget,
        others=_others(ctx),
        subtask=describe_subtask(ctx.subtask),
    )


def _stitch(req: CoderRequest, ctx: StitchContext, prev: Attempt, common: dict[str, object]) -> str:
    groups = f"in CUDA: {', '.join(ctx.in_cuda) or 'none'}"
    if ctx.in_pytorch:
        groups += f"; still PyTorch: {', '.join(ctx.in_pytorch)}"
        leftover = (
            f"write the groups still in PyTorch ({', '.join(ctx.in_pytorch)}) in CUDA as well "
            "(their own subtasks did not reach a correct version)"
        )
    else:
        leftover = "every group is already in CUDA: keep each one's verified arithmetic"
    speed = prev.verdict.speedup
    return render(
        "stitch",
        groups=groups,
        leftover=leftover,
        speedup=f"{speed:.2f}x" if speed is not None else "an unmeasured speed",
        target=f"{req.target_speedup:g}",
        feedback=format_feedback(prev.verdict),
        code=prev.code.rstrip() if prev.code else "",
        **common,
    )


class LLMCoder:
    """Asks the endpoint for a file; endpoint failures propagate as EndpointError."""

    name = "llm"
    iterative = True

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def write(self, request: CoderRequest) -> CoderReply:
        messages = build_messages(request)
        try:
            reply = self.client.chat(messages)
        except EndpointError as exc:
            if exc.kind != "too_large":
                raise
            # An attempt without code that says why; the loop's no-code rule ends the run if
            # the model keeps doing it. Nothing of the reply is kept.
            return CoderReply(
                messages=messages, reply="", code=None, problem=str(exc), finish_reason="too_large"
            )
        found = extract_code(reply.text)
        return CoderReply(
            messages=messages,
            reply=reply.text,
            code=found.code,
            problem=found.problem,
            finish_reason=reply.finish_reason,
            model=reply.model,
            usage=reply.usage,
        )


TORCH_MISSING = (
    "torch is not installed for the workers' Python, and the builtin generator needs it: "
    "install it with `pip install 'stitch-lsp[torch]'` (the CPU wheel) or a CUDA build of "
    "torch, or point stitch.pythonForWorkers (STITCH_PYTHON_FOR_WORKERS) at a Python that has it"
)


def _torch_missing(reason: str) -> bool:
    return "No module named 'torch'" in reason or "cannot import torch" in reason


@dataclass
class BuiltinDraft:
    handled: bool
    source: str | None
    reason: str
    fallbacks: tuple[str, ...] = ()  # ops the program runs as PyTorch calls (not generated)


class BuiltinCoder:
    """The deterministic generator: one draft, no repairs. `generate` runs its torch worker."""

    name = "builtin"
    iterative = False

    def __init__(self, generate: Callable[[], BuiltinDraft]) -> None:
        self._generate = generate
        self._draft: BuiltinDraft | None = None

    def draft(self) -> BuiltinDraft:
        if self._draft is None:
            self._draft = self._generate()
        return self._draft

    def write(self, request: CoderRequest) -> CoderReply:
        messages = build_messages(request)
        d = self.draft()
        if not d.handled or not d.source:
            return CoderReply(
                messages=messages,
                reply="",
                code=None,
                problem=TORCH_MISSING
                if _torch_missing(d.reason)
                else f"the builtin generator does not handle this module: {d.reason}",
            )
        reply = (
            f"{d.reason}\n\n```python\n{d.source.rstrip()}\n```\n"
            if d.reason
            else f"```python\n{d.source.rstrip()}\n```\n"
        )
        return CoderReply(
            messages=messages, reply=reply, code=d.source, finish_reason="stop", model="builtin"
        )
