"""StitchCUDA's rubric (four items, 1 to 5) and reward, scored by rules and optionally an LLM
judge.

The rules read what the Verifier and the static checks already found (exploit verdicts, error
findings) and a few visible features of the CUDA text (shared-memory tiles, vector loads, async
copies, tensor cores, launch sizing). They are coarse on purpose: they are cheap, deterministic
and explainable; the judge, when configured, adds the reading that rules cannot do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from stitch_lsp.agents.llm import ChatClient, EndpointError
from stitch_lsp.agents.planner import describe_plan, parse_plan_json
from stitch_lsp.agents.prompts import render
from stitch_lsp.models.agents import Attempt, CoderStage, Plan, Rubric, RubricItem, Verdict
from stitch_lsp.models.findings import Severity

_ENGINEERING: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("shared-memory tiles", re.compile(r"__shared__")),
    (
        "vectorized or read-only loads",
        re.compile(r"\bfloat4\b|\bfloat2\b|__ldg\s*\(|reinterpret_cast<\s*const\s+float4"),
    ),
    ("async copies", re.compile(r"cp\.async|__pipeline_memcpy_async|cuda::memcpy_async|cp_async")),
    ("tensor cores", re.compile(r"\bwmma::|mma\.sync|\bwgmma\b|nvcuda::wmma")),
    (
        "launch sized from the problem",
        re.compile(r"\+\s*\w+\s*-\s*1\s*\)\s*/|ceil_div|cdiv|DIV_UP", re.I),
    ),
    ("warp-level primitives", re.compile(r"__shfl_\w+_sync")),
    ("unrolled inner loops", re.compile(r"#pragma\s+unroll")),
    ("restrict-qualified pointers", re.compile(r"__restrict__")),
)
_TORCH_COMPUTE = re.compile(
    r"\b(?:torch|F|nn\.functional)\.(?:matmul|mm|bmm|addmm|einsum|linear|conv\w*|softmax|log_softmax|"
    r"layer_norm|group_norm|batch_norm|instance_norm|gelu|relu|sigmoid|tanh|mish|silu|logsumexp|"
    r"scaled_dot_product_attention|cumsum|sum|mean|max|min|argmax)\s*\("
)
# Static-check ids (stitch_lsp.analysis.rules) and Verifier exploit codes that mean reward hacking.
HACK_CODES = re.compile(
    r"^stitch\.(torch-op|torch-fallback|reference-call|noop-forward|side-stream|threads|"
    r"timer-patch|harness-patch|call-count|token-paste|event-join|"
    r"downcast|input-cache|input-mutation|constant-output|lazy-tensor|cpu-compute|"
    r"exploit\.[\w.-]+)$"
)
_KERNEL = re.compile(r"__global__")


def _item(score: int, *reasons: str) -> RubricItem:
    return RubricItem(score=max(1, min(5, score)), reasons=[r for r in reasons if r])


def _python_part(code: str) -> str:
    """The code with string literals (where load_inline CUDA lives) blanked out."""
    return re.sub(r'("""|\'\'\')(.*?)\1', '""', code, flags=re.S)


def score_rules(
    code: str | None,
    verdict: Verdict,
    stage: CoderStage,
    plan: Plan,
    previous: Attempt | None,
    *,
    partial_groups: tuple[int, int] | None = None,
    step_base: str | None = None,
) -> Rubric:
    """`partial_groups`: (groups meant to be in CUDA, all groups) for a step of a step-by-step
    build, whose later groups are PyTorch by design: PyTorch left there is neither a hack nor a
    coverage gap of this step. `step_base`: the program that step started from."""
    if not code:
        low = _item(1, "no code")
        return Rubric(anti_hacking=low, engineering=low, coverage=low, compliance=low)

    errors = [d for d in verdict.diagnostics if d.severity is Severity.error]
    hacks = [d for d in verdict.diagnostics if HACK_CODES.match(d.code)]
    if partial_groups is not None:
        hacks = [d for d in hacks if d.severity is Severity.error or "torch-op" not in d.code]
    major = verdict.status == "exploit" or any(d.severity is Severity.error for d in hacks)
    if major:
        why = verdict.message if verdict.status == "exploit" else hacks[0].message
        anti = _item(1, f"major hack: {why}")
    elif hacks:
        anti = _item(3, *(f"line {d.line}: {d.message}" for d in hacks[:3]))
    elif verdict.status == "passed":
        anti = _item(5, "passed the Verifier's correctness and anti-cheating checks")
    elif verdict.status == "compiled":
        anti = _item(4, "clean under the static checks; not run on a GPU")
    else:
        anti = _item(3, f"not verified ({verdict.status})")

    kernels = len(_KERNEL.findall(code))
    features = [name for name, pat in _ENGINEERING if pat.search(code)]
    if kernels == 0:
        eng = _item(1, "no __global__ kernel")
    else:
        uses = [f"uses {f}" for f in features] or ["plain kernels"]
        eng = _item(2 + len(features) // 2, *uses)

    torch_ops = sorted(
        {m.group(0).rstrip("( ") for m in _TORCH_COMPUTE.finditer(_python_part(code))}
    )
    if kernels == 0:
        cov = _item(1, "no CUDA kernels: the work stays in PyTorch")
    elif partial_groups is not None:
        done, total = partial_groups
        cov = _item(
            1 + round(4 * done / max(total, 1)),
            f"partial program: {done} of {total} planned groups in CUDA, the rest PyTorch "
            "until their subtasks",
        )
    elif torch_ops:
        cov = _item(
            3 if len(torch_ops) == 1 else 2, "torch compute left in Python: " + ", ".join(torch_ops)
        )
    else:
        cov = _item(5, f"{kernels} CUDA kernel(s); no torch compute operators in the Python code")
    if verdict.attribution and code:
        # Measured on the GPU: how much of the time the candidate's own kernels run.
        cov = cov.model_copy(update={"reasons": [*cov.reasons, verdict.attribution]})

    comp = _compliance(
        code, verdict, stage, plan, previous, kernels, errors, partial_groups, step_base
    )
    return Rubric(
        anti_hacking=anti, engineering=eng, coverage=cov, compliance=comp, major_hack=major
    )


def _compliance(
    code: str,
    verdict: Verdict,
    stage: CoderStage,
    plan: Plan,
    previous: Attempt | None,
    kernels: int,
    errors: Sequence[object],
    partial_groups: tuple[int, int] | None = None,
    step_base: str | None = None,
) -> RubricItem:
    if stage is CoderStage.draft and partial_groups is not None:
        had = len(_KERNEL.findall(step_base)) if step_base else 0
        if kernels > had:
            return _item(5, f"{kernels - had} new kernel(s) for this step's group")
        return _item(2, "no new kernel for this step's group")
    if stage is CoderStage.draft:
        want = len(plan.fusion_groups)
        if want == 0:
            return _item(3, "no fusion groups in the plan to compare with")
        if kernels == want:
            return _item(5, f"{kernels} kernel(s) for {want} planned fusion group(s)")
        return _item(
            4 if abs(kernels - want) == 1 else 3, f"{kernels} kernel(s) for {want} planned group(s)"
        )
    if previous is None or previous.code is None:
        return _item(3, "nothing to compare with")
    if code.strip() == previous.code.strip():
        return _item(1, "the code did not change")
    if stage is CoderStage.repair_compile:
        fixed = verdict.status != "compile_error"
        return _item(
            5 if fixed else 2, "the build error was fixed" if fixed else "still does not build"
        )
    if stage is CoderStage.repair_correctness:
        if verdict.status in {"passed", "compiled"}:
            return _item(5, "the mismatch was fixed")
        return _item(2, f"still {verdict.status}")
    before, after = previous.verdict.speedup, verdict.speedup
    if verdict.status != "passed":
        return _item(1, f"the optimization broke the program ({verdict.status})")
    if before is None or after is None:
        return _item(3, "speed not measured")
    if after > before * 1.02:
        return _item(5, f"faster: {before:.2f}x -> {after:.2f}x")
    return _item(3, f"not faster: {before:.2f}x -> {after:.2f}x")


def judge(
    client: ChatClient,
    rules: Rubric,
    *,
    code: str,
    reference: str,
    plan: Plan,
    stage: CoderStage,
    feedback: str,
    verdict: Verdict,
    note: str = "",
) -> Rubric:
    """Average the judge's scores with the rules' (the rules keep the last word on major hacks).
    `note` says more about the stage, e.g. that the program is a partial step."""
    messages = [
        {"role": "system", "content": render("judge_system")},
        {
            "role": "user",
            "content": render(
                "judge",
                stage=f"{stage.value} ({note})" if note else stage.value,
                reference=reference.rstrip(),
                plan=describe_plan(plan),
                feedback=feedback or "(none)",
                code=code.rstrip(),
                verdict=f"{verdict.status}; {verdict.message}"[:500],
            ),
        },
    ]
    try:
        data = parse_plan_json(client.chat(messages).text)
    except (EndpointError, ValueError, json.JSONDecodeError):
        return rules
    reasons = data.get("reasons") if isinstance(data.get("reasons"), dict) else {}
    items = {}
    for key in ("anti_hacking", "engineering", "coverage", "compliance"):
        rule_item: RubricItem = getattr(rules, key)
        raw = data.get(key)
        if not isinstance(raw, (int, float)) or not 1 <= raw <= 5:
            items[key] = rule_item
            continue
        score = round((rule_item.score + float(raw)) / 2 + 1e-9)
        why = str(reasons.get(key, "")) if isinstance(reasons, dict) else ""
        items[key] = _item(score, *rule_item.reasons, f"judge: {int(raw)}/5 {why}".strip())
    if all(items[k] is getattr(rules, k) for k in items):
        return rules  # the judge gave no usable score
    if rules.major_hack:
        items["anti_hacking"] = rules.anti_hacking
    return Rubric(**items, judge="rules+llm", major_hack=rules.major_hack)


def reward(rubric: Rubric, verdict: Verdict, stage: CoderStage) -> float | None:
    """The paper's reward; None when correctness was not checked (compile-only runs)."""
    correct = verdict.correct
    if correct is None:
        return None
    if not correct or rubric.major_hack:
        return 0.0
    base = min(verdict.speedup or 0.0, 5.0) + 0.3
    r = (rubric.total - 4) / 16
    lam = 0.7 if stage is CoderStage.optimize_performance else 1.0
    return round(min(base * (1 + lam * (r - 0.5)), 3.0), 6)
