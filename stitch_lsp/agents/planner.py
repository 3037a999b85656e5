"""The Planner: analysis of the reference (torch worker), a deterministic plan, an optional LLM
plan.

The deterministic plan groups the graph around its heavy operators (GEMM, convolution,
attention): each anchor gets the elementwise and normalisation tail that follows it, as in
StitchCUDA's fusion boundaries. An LLM, when configured, reviews that plan with the same
analysis in front of it. A replan answers the Verifier's history and records the failed strategy
in `avoid`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from stitch_lsp.agents.hardware import default_target
from stitch_lsp.agents.llm import ChatClient
from stitch_lsp.agents.prompts import render
from stitch_lsp.compiler.ops import is_anchor
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import (
    Attempt,
    OpCost,
    Plan,
    PlannedGroup,
    PlannerRequest,
    ReferenceAnalysis,
)
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import (
    WorkerCall,
    WorkerError,
    WorkerErrorKind,
    WorkerLauncher,
    run_worker,
)


def _is_anchor(op: str) -> bool:
    """A heavy op (the registry's GEMM, convolution, attention and recurrent kinds), or a
    reference's own inline CUDA: a fusion group starts there and absorbs what follows."""
    return op == "inline ops" or is_anchor(op)


_RISKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"softmax|log_softmax|logsumexp|LogSoftmax|Softmax|CrossEntropy", re.I),
        "softmax/logsumexp: subtract the row maximum before exp; reduce across blocks carefully",
    ),
    (
        re.compile(r"norm|Norm", re.I),
        "normalisation: accumulate mean and variance in fp32 (Welford or two passes), same eps; "
        "BatchNorm in training mode uses batch statistics",
    ),
    (
        re.compile(r"gelu|GELU|NewGELU", re.I),
        "GELU: match the reference's variant (erf or tanh approximation)",
    ),
    (
        re.compile(r"sum|mean|amax|max|min|argmax|argmin|cumsum|MSELoss", re.I),
        "reductions: handle the reduced dimension's tail and combine partial results across blocks",
    ),
    (re.compile(r"div|truediv", re.I), "division: keep the operand order and the exact divisor"),
    (
        re.compile(r"Conv|conv", re.I),
        "convolution: padding, stride, dilation and output-size arithmetic must match exactly",
    ),
)


class PlannerError(RuntimeError):
    pass


def analyze_reference(
    reference: Path,
    settings: Settings,
    *,
    profile: bool = False,
    cancel: threading.Event | None = None,
    timeout_s: float = 300.0,
    launcher: WorkerLauncher | None = None,
) -> ReferenceAnalysis:
    """Run the torch worker on `reference`; raise PlannerError with its output when it fails."""
    reference = Path(reference).resolve()
    call = WorkerCall(
        module=WORKER_ENTRY_POINTS["planner"],
        request=PlannerRequest(reference=str(reference), profile=profile),
        result=ReferenceAnalysis,
        timeout_s=timeout_s,
        python=settings.python_for_workers,
        label="the planner's analysis",
        sandbox=settings.sandbox,
    )
    try:
        return run_worker(call, cancel, launcher).result
    except WorkerError as exc:
        if exc.kind is WorkerErrorKind.cancelled:
            raise PlannerError("cancelled") from None
        if exc.kind is WorkerErrorKind.timeout:
            raise PlannerError(f"planner analysis took longer than {timeout_s:g} s") from None
        lines = [ln for ln in exc.log_tail.strip().splitlines() if ln.strip()]
        tail = "\n".join(lines[-6:]) or exc.message
        raise PlannerError(f"planner analysis of {reference.name} failed: {tail}") from None


def plan_from_analysis(analysis: ReferenceAnalysis) -> Plan:
    """A plan from the numbers alone: fuse each heavy op with the cheap ops that follow it."""
    work = [op for op in analysis.ops if op.flops > 0 or op.bytes > 0]
    if not work:
        why = "; ".join(analysis.notes) or "the graph could not be captured"
        return Plan(
            summary=f"Plan from the source alone ({why}).",
            steps=[
                "Read forward() and list its operators in order.",
                "Fuse each heavy operator (GEMM, convolution) with the elementwise and "
                "normalisation ops that follow it; one memory pass for memory-bound chains.",
                "ModelNew.forward launches the kernels in order on the current stream.",
            ],
            correctness_risks=["fp32 stays fp32: no TF32 or fp16 shortcuts; tolerance 1e-4"],
            constraints=["ModelNew keeps Model's constructor, forward signature and parameters"],
            analysis=analysis,
        )
    groups: list[list[OpCost]] = []
    for op in work:
        if _is_anchor(op.op) or not groups:
            groups.append([op])
        else:
            groups[-1].append(op)
    fusion: list[PlannedGroup] = []
    steps: list[str] = []
    for i, group in enumerate(groups, 1):
        anchor = next((o for o in group if _is_anchor(o.op)), None)
        names = [o.node for o in group]
        tail = [o.op for o in group if o is not anchor]
        if anchor is not None:
            how = f"a tiled {anchor.op} kernel (shared-memory tiles, fp32 accumulation)"
            if tail:
                how += f" with {', '.join(tail)} in its epilogue, while the tile is in registers"
            why = (
                f"{anchor.op} is {anchor.bound}-bound; its tail would otherwise re-read the output"
            )
        else:
            how = (
                f"one pass over memory for {', '.join(o.op for o in group)} (vectorized, coalesced)"
            )
            why = "memory-bound: one read and one write of each tensor is the floor"
        fusion.append(
            PlannedGroup(
                name=f"k{i}", ops=names, anchor=anchor.node if anchor else None, rationale=why
            )
        )
        steps.append(f"Kernel k{i} ({', '.join(names)}): {how}.")
    steps.append(
        "ModelNew.forward launches the kernels in order on the current stream; no torch ops."
    )
    ranked = sorted(work, key=lambda o: -(o.measured_ms or o.floor_ms))
    total = sum(o.measured_ms or o.floor_ms for o in work) or 1.0
    bottlenecks = [
        f"{o.node} ({o.op}, {o.bound}-bound): "
        + (
            f"{o.measured_ms:.3f} ms measured"
            if o.measured_ms is not None
            else f"floor {o.floor_ms:.3f} ms"
        )
        + f", {100 * (o.measured_ms or o.floor_ms) / total:.0f}% of the total"
        for o in ranked[:3]
    ]
    op_names = " ".join(o.op for o in work)
    risks = [text for pattern, text in _RISKS if pattern.search(op_names)]
    risks.append("fp32 stays fp32: no TF32 or fp16 shortcuts; match the tolerance 1e-4")
    hw = analysis.hardware
    constraints = [
        f"target {hw.name} (sm_{(hw.compute_capability or '9.0').replace('.', '')})",
        "ModelNew keeps Model's constructor, forward signature, parameter names and shapes",
        "the heavy operators run in CUDA, not in PyTorch",
    ]
    fused, unfused = analysis.fused_floor_ms, analysis.unfused_floor_ms
    floor = f"fused floor {fused:.3f} ms vs unfused {unfused:.3f} ms"
    eager = f"; eager {analysis.eager_ms:.3f} ms" if analysis.eager_ms is not None else ""
    summary = f"{len(fusion)} fused kernel(s) for {analysis.module} on {hw.name}: {floor}{eager}."
    return Plan(
        summary=summary,
        fusion_groups=fusion,
        steps=steps,
        expected_bottlenecks=bottlenecks,
        correctness_risks=risks,
        constraints=constraints,
        analysis=analysis,
    )


def fallback_analysis(reason: str) -> ReferenceAnalysis:
    """When the worker cannot run (no torch for workers), plan from the source alone and say so."""
    return ReferenceAnalysis(hardware=default_target(), notes=[f"no graph analysis: {reason}"])


def describe_analysis(analysis: ReferenceAnalysis, limit: int = 25) -> str:
    lines = [
        f"graph: {analysis.graph_method or 'none'}; inputs "
        + ", ".join(f"{m.dtype}{m.shape}" for m in analysis.inputs)
    ]
    for o in analysis.ops[:limit]:
        if o.flops == 0 and o.bytes == 0:
            continue
        measured = f", measured {o.measured_ms:.3f} ms" if o.measured_ms is not None else ""
        lines.append(
            f"- {o.node}: {o.op}, {o.flops:.3g} FLOP, {o.bytes / 1e6:.1f} MB, "
            f"{o.bound}-bound, floor {o.floor_ms:.3f} ms{measured}"
        )
    lines.append(
        f"total {analysis.total_flops:.3g} FLOP; fused floor {analysis.fused_floor_ms:.3f} ms "
        f"({analysis.fused_bytes / 1e6:.1f} MB moved); "
        f"unfused floor {analysis.unfused_floor_ms:.3f} ms"
    )
    if analysis.eager_ms is not None:
        lines.append(f"eager {analysis.eager_ms:.3f} ms on {analysis.hardware.name}")
    lines += [
        f"kernel {k.name[:80]}: {k.device_ms:.3f} ms x{k.calls}" for k in analysis.kernels[:5]
    ]
    if analysis.timeline is not None:
        from stitch_lsp.verify.timeline import advice, describe

        lines.append(f"timeline per forward: {describe(analysis.timeline)}")
        hint = advice(analysis.timeline)
        if hint:
            lines.append(f"timeline: {hint}")
    lines += [f"note: {n}" for n in analysis.notes]
    return "\n".join(lines)


def describe_plan(plan: Plan) -> str:
    """The plan as the Coder reads it (no analysis dump)."""
    data = plan.model_dump(exclude={"analysis", "revision", "source"})
    return json.dumps(data, indent=1)


def describe_hardware(analysis: ReferenceAnalysis | None) -> str:
    hw = (analysis.hardware if analysis else None) or default_target()
    parts = [hw.name, f"compute capability {hw.compute_capability or '?'}"]
    if hw.sm_count:
        parts.append(f"{hw.sm_count} SMs")
    if hw.memory_gib:
        parts.append(f"{hw.memory_gib:g} GiB")
    parts.append(f"{hw.bandwidth_tb_s:g} TB/s, {hw.fp32_tflops:g} FP32 TFLOP/s ({hw.source})")
    return ", ".join(parts)


def parse_plan_json(text: str) -> dict[str, object]:
    """The JSON object in an LLM reply (bare, or inside a fence)."""
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    data = json.loads(body[start : end + 1])
    if not isinstance(data, dict):
        raise ValueError("the JSON is not an object")
    return data


def llm_plan(
    client: ChatClient, base: Plan, reference_name: str, reference: str
) -> tuple[Plan, list[dict[str, str]], str]:
    """Ask the LLM to improve `base`; fall back to `base` (with a note) on an unusable answer."""
    messages = [
        {"role": "system", "content": render("planner_system")},
        {
            "role": "user",
            "content": render(
                "planner",
                hardware=describe_hardware(base.analysis),
                reference_name=reference_name,
                reference=reference,
                analysis=describe_analysis(base.analysis) if base.analysis else "(none)",
                plan=describe_plan(base),
            ),
        },
    ]
    reply = client.chat(messages)
    return _merge(base, reply.text, source="analysis+llm"), messages, reply.text


def replan(
    plan: Plan,
    history: Sequence[Attempt],
    trigger: str,
    *,
    client: ChatClient | None,
    reference_name: str,
    reference: str,
) -> tuple[Plan, list[dict[str, str]] | None, str | None]:
    """A new plan revision that answers `history` and does not repeat the failed strategy."""
    failed = f"rev {plan.revision}: {plan.summary} -> {trigger}"
    avoid = [*plan.avoid, failed]
    if client is None:
        new = _deterministic_replan(plan, trigger, avoid)
        return new, None, None
    messages = [
        {"role": "system", "content": render("planner_system")},
        {
            "role": "user",
            "content": render(
                "replan",
                trigger=trigger,
                history=describe_history(history),
                avoid="\n".join(f"- {a}" for a in avoid),
                hardware=describe_hardware(plan.analysis),
                reference_name=reference_name,
                reference=reference,
                plan_revision=plan.revision,
                plan=describe_plan(plan),
            ),
        },
    ]
    reply = client.chat(messages)
    merged = _merge(plan, reply.text, source="llm")
    if merged is plan:  # unusable answer: fall back to the rule-based revision
        return _deterministic_replan(plan, trigger, avoid), messages, reply.text
    merged.avoid = list(dict.fromkeys([*avoid, *merged.avoid]))
    merged.revision = plan.revision + 1
    return merged, messages, reply.text


def _merge(base: Plan, text: str, *, source: str) -> Plan:
    try:
        data = parse_plan_json(text)
        data = {
            k: v
            for k, v in data.items()
            if k in Plan.model_fields and k not in {"analysis", "revision", "source"}
        }
        return Plan.model_validate(
            {
                **base.model_dump(exclude={"analysis"}),
                **data,
                "source": source,
                "analysis": base.analysis,
            }
        )
    except (ValueError, ValidationError) as exc:
        base.steps = list(base.steps)
        first = str(exc).splitlines()[0][:120]
        note = f"the LLM's plan was unusable ({first}); kept the analysis plan"
        if base.analysis is not None and note not in base.analysis.notes:
            base.analysis.notes.append(note)
        return base


def _deterministic_replan(plan: Plan, trigger: str, avoid: list[str]) -> Plan:
    """Without an LLM: less ambitious where it broke, more targeted where it stalled."""
    new = plan.model_copy(deep=True)
    new.revision = plan.revision + 1
    new.avoid = avoid
    if "within 5%" in trigger:
        new.summary = (
            f"Revision {new.revision}: keep the correct kernels and attack the measured bottleneck."
        )
        new.steps = [
            "Start from the best correct version; change one kernel at a time.",
            "Address the profiler's top finding first (occupancy, memory coalescing, or stalls).",
            "Try a different tiling or vector width than the previous attempts.",
            *plan.steps,
        ]
    else:
        split: list[PlannedGroup] = []
        for g in plan.fusion_groups:
            if len(g.ops) > 1:
                split.extend(
                    PlannedGroup(
                        name=f"{g.name}.{j}",
                        ops=[op],
                        anchor=op if op == g.anchor else None,
                        rationale="split after failures: one op per kernel until it is correct",
                    )
                    for j, op in enumerate(g.ops, 1)
                )
            else:
                split.append(g)
        new.fusion_groups = split
        new.summary = (
            f"Revision {new.revision}: simpler kernels, one operator each, to get a correct "
            "build first; fuse again once it passes."
        )
        new.steps = [
            "Write one plain kernel per operator (no fusion yet), checked launch by launch.",
            "Use plain global-memory indexing with bounds checks; no shared-memory tricks yet.",
            *[f"Kernel {g.name}: {', '.join(g.ops)}" for g in split],
        ]
    return new


def describe_history(history: Sequence[Attempt]) -> str:
    lines = []
    for a in history:
        v = a.verdict
        detail = v.message
        if v.status == "compile_error" and v.diagnostics:
            d = v.diagnostics[0]
            detail = f"line {d.line}: {d.message}"
        elif v.correctness:
            detail = v.correctness
        elif v.speedup is not None:
            detail = f"speedup {v.speedup:.2f}x"
        lines.append(
            f"- attempt {a.index} ({a.stage.value}, plan rev {a.plan_revision}): {v.status}: "
            f"{detail[:300]}"
        )
    return "\n".join(lines) or "(no attempts yet)"
