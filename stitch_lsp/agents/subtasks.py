"""The Planner's fusion groups as subtasks of a step-by-step run (StitchCUDA's decomposition).

A model with two or more fusion groups is built one group at a time: subtask k writes group k in
CUDA into a program whose other groups are PyTorch, and the Verifier checks it against the whole
reference. One group means one subtask, and a one-shot run (no overhead for small problems).

Subtasks follow the forward's order. The plan's groups are used when they partition the
analysis's ops into runs of consecutive ops (an LLM's plan may not); otherwise the analysis's own
groups are. More than `MAX_SUBTASKS` groups (a deep network) are merged into that many runs of
adjacent groups, so a 50-block network is not 50 rounds of prompts.
"""

from __future__ import annotations

import math

from stitch_lsp.agents import partial
from stitch_lsp.compiler.ops import short_name
from stitch_lsp.models.agents import OpCost, Plan, PlannedGroup, Subtask, SubtaskOp

MAX_SUBTASKS = 8


def subtask_budget(max_attempts: int) -> int:
    """Attempts one subtask may use: half the run's budget, and at least two (a draft and one
    repair)."""
    return max(2, math.ceil(max_attempts / 2))


def label(ops: list[OpCost]) -> str:
    names: list[str] = []
    for o in ops:
        n = short_name(o.op)
        if not names or names[-1] != n:
            names.append(n)
    if len(names) > 5:
        names = [*names[:4], f"…(+{len(names) - 4})"]
    return "+".join(names) or "ops"


def _work(plan: Plan) -> list[OpCost]:
    analysis = plan.analysis
    if analysis is None:
        return []
    return [op for op in analysis.ops if op.flops > 0 or op.bytes > 0]


def _runs(groups: list[PlannedGroup], work: list[OpCost]) -> list[tuple[str, list[OpCost]]] | None:
    """The groups as runs of consecutive work ops in forward order; None when they are not a
    partition of the work into such runs."""
    position = {op.node: i for i, op in enumerate(work)}
    seen: set[str] = set()
    runs: list[tuple[int, str, list[OpCost]]] = []
    for g in groups:
        at = []
        for name in g.ops:
            if name not in position or name in seen:
                return None
            seen.add(name)
            at.append(position[name])
        if not at:
            return None
        at.sort()
        if at != list(range(at[0], at[0] + len(at))):
            return None
        runs.append((at[0], g.name, [work[i] for i in at]))
    if seen != set(position):
        return None
    return [(name, ops) for _, name, ops in sorted(runs, key=lambda r: r[0])]


def _merge(
    runs: list[tuple[str, list[OpCost]]], limit: int
) -> list[tuple[list[str], list[OpCost]]]:
    if len(runs) <= limit:
        return [([name], ops) for name, ops in runs]
    out: list[tuple[list[str], list[OpCost]]] = []
    size, extra = divmod(len(runs), limit)
    i = 0
    for k in range(limit):
        n = size + (1 if k < extra else 0)
        chunk = runs[i : i + n]
        out.append(([name for name, _ in chunk], [op for _, ops in chunk for op in ops]))
        i += n
    return out


def _bottleneck(ops: list[OpCost], total_ms: float) -> str:
    heavy = max(ops, key=lambda o: o.measured_ms or o.floor_ms)
    ms = heavy.measured_ms or heavy.floor_ms
    how = "measured" if heavy.measured_ms is not None else "floor"
    share = f", {100 * ms / total_ms:.0f}% of the model" if total_ms > 0 else ""
    return f"{heavy.node} ({heavy.op}, {heavy.bound}-bound): {how} {ms:.3f} ms{share}"


def plan_subtasks(plan: Plan, limit: int = MAX_SUBTASKS) -> tuple[list[Subtask], str | None]:
    """(subtasks, note): no subtasks for fewer than two groups; the note says when the plan's
    own groups could not be used."""
    from stitch_lsp.agents.planner import plan_from_analysis

    work = _work(plan)
    if not work or plan.analysis is None:
        return [], None
    note = None
    runs = _runs(plan.fusion_groups, work)
    if runs is None:
        runs = _runs(plan_from_analysis(plan.analysis).fusion_groups, work)
        note = "the plan's groups do not split the ops into runs in forward order; subtasks "
        note += "follow the analysis's groups"
    if runs is None or len(runs) < 2:
        return [], note
    merged = _merge(runs, limit)
    if len(merged) < len(runs):
        extra = f"{len(runs)} fusion groups merged into {len(merged)} subtasks of adjacent groups"
        note = f"{note}; {extra}" if note else extra
    total_ms = sum(o.measured_ms or o.floor_ms for o in work)
    scaffold = plan.analysis.scaffold
    subtasks: list[Subtask] = []
    for k, (names, ops) in enumerate(merged, 1):
        st = Subtask(
            index=k,
            total=len(merged),
            groups=names,
            label=label(ops),
            ops=[
                SubtaskOp(node=o.node, op=o.op, shapes=[m.shape for m in o.outputs], line=o.line)
                for o in ops
            ],
            lines=sorted({o.line for o in ops if o.line is not None}),
            bottleneck=_bottleneck(ops, total_ms),
        )
        if scaffold is not None:
            st.inputs, st.outputs = partial.block_io(scaffold, st)
        subtasks.append(st)
    return subtasks, note


def describe(st: Subtask) -> str:
    """The subtask as the Coder reads it: its ops with shapes and lines, its bottleneck."""
    lines = [f"{st.title} (fusion group{'s' if len(st.groups) > 1 else ''} {st.group})"]
    for o in st.ops:
        shape = " ".join(str(s) for s in o.shapes) or "?"
        where = f", line {o.line}" if o.line is not None else ""
        lines.append(f"- {o.node}: {o.op} -> {shape}{where}")
    if st.inputs:
        lines.append(f"It reads: {', '.join(st.inputs)}")
    if st.outputs:
        lines.append(f"Later code uses: {', '.join(st.outputs)} (keep these names defined)")
    if st.bottleneck:
        lines.append(f"Expected bottleneck: {st.bottleneck}")
    return "\n".join(lines)
