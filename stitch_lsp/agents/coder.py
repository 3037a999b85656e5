"""The Coder: turns a plan and the Verifier's feedback into a candidate file.

Two implementations share one interface: `LLMCoder` (any OpenAI-compatible endpoint) and
`BuiltinCoder` (the deterministic generator of `stitch_lsp.agents.builtin`). Both record the
prompt they answer, so every attempt's trajectory is a chat transcript whatever wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from stitch_lsp.agents.extract import extract_code
from stitch_lsp.agents.llm import ChatClient
from stitch_lsp.agents.planner import describe_hardware, describe_plan
from stitch_lsp.agents.prompts import render
from stitch_lsp.models.agents import Attempt, CoderStage, Plan, Verdict

_MAX_DIAGNOSTICS = 20


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
    if req.stage is CoderStage.draft or prev is None or prev.code is None:
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
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class LLMCoder:
    """Asks the endpoint for a file; endpoint failures propagate as EndpointError."""

    name = "llm"
    iterative = True

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    def write(self, request: CoderRequest) -> CoderReply:
        messages = build_messages(request)
        reply = self.client.chat(messages)
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


@dataclass
class BuiltinDraft:
    handled: bool
    source: str | None
    reason: str


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
                problem=f"the builtin generator does not handle this module: {d.reason}",
            )
        reply = (
            f"{d.reason}\n\n```python\n{d.source.rstrip()}\n```\n"
            if d.reason
            else f"```python\n{d.source.rstrip()}\n```\n"
        )
        return CoderReply(
            messages=messages, reply=reply, code=d.source, finish_reason="stop", model="builtin"
        )
