import pytest

from stitch_lsp.agents.planner import plan_from_analysis
from stitch_lsp.agents.rubric import reward, score_rules
from stitch_lsp.models.agents import Attempt, CoderStage, Rubric, RubricItem, Verdict
from stitch_lsp.models.findings import Finding, Severity
from tests.agents.helpers import candidate, fake_analysis


def _rubric(total: int, major: bool = False) -> Rubric:
    scores = [total // 4 + (1 if i < total % 4 else 0) for i in range(4)]
    items = [RubricItem(score=s) for s in scores]
    return Rubric(
        anti_hacking=items[0],
        engineering=items[1],
        coverage=items[2],
        compliance=items[3],
        major_hack=major,
    )


@pytest.mark.parametrize(
    ("speedup", "total", "stage", "expected"),
    [
        (1.0, 12, CoderStage.draft, 1.3),  # r = 0.5: base unchanged
        (2.0, 20, CoderStage.draft, 2.3 * 1.5),  # r = 1
        (2.0, 20, CoderStage.optimize_performance, 2.3 * 1.35),  # lambda 0.7
        (10.0, 20, CoderStage.draft, 3.0),  # capped at 3
        (0.5, 4, CoderStage.repair_compile, 0.8 * 0.5),  # r = 0
    ],
)
def test_reward_formula(speedup, total, stage, expected):
    v = Verdict(status="passed", speedup=speedup)
    assert reward(_rubric(total), v, stage) == pytest.approx(min(expected, 3.0))


def test_reward_is_zero_when_wrong_or_hacked_and_unknown_when_unchecked():
    assert reward(_rubric(20), Verdict(status="incorrect"), CoderStage.draft) == 0.0
    assert (
        reward(_rubric(20, major=True), Verdict(status="passed", speedup=3), CoderStage.draft) == 0
    )
    assert reward(_rubric(20), Verdict(status="compiled"), CoderStage.draft) is None


def test_rules_see_hacks_engineering_and_coverage(tmp_path):
    plan = plan_from_analysis(fake_analysis(tmp_path, None))
    hack = Finding(
        path="c.py",
        line=9,
        severity=Severity.error,
        code="stitch.torch-op",
        message="torch.matmul in forward",
    )
    v = Verdict(status="passed", speedup=1.0, diagnostics=[hack])
    r = score_rules(candidate("VERDICT passed"), v, CoderStage.draft, plan, None)
    assert r.major_hack and r.anti_hacking.score == 1
    assert reward(r, v, CoderStage.draft) == 0.0

    fancy = candidate("VERDICT passed", extra="# __shared__ float4 tile; #pragma unroll\n")
    clean = score_rules(fancy, Verdict(status="passed", speedup=1), CoderStage.draft, plan, None)
    assert not clean.major_hack and clean.anti_hacking.score == 5
    assert clean.engineering.score > 2
    assert clean.coverage.score == 5

    lazy = candidate("VERDICT passed", extra="def f(x):\n    return torch.softmax(x, -1)\n")
    assert (
        score_rules(lazy, Verdict(status="passed"), CoderStage.draft, plan, None).coverage.score < 5
    )


def test_compliance_follows_the_stage(tmp_path):
    plan = plan_from_analysis(fake_analysis(tmp_path, None))
    assert len(plan.fusion_groups) == 1
    code = candidate("VERDICT passed")
    ok = Verdict(status="passed", speedup=1.2)
    assert score_rules(code, ok, CoderStage.draft, plan, None).compliance.score == 5
    prev = Attempt(
        index=1,
        stage=CoderStage.draft,
        coder="llm",
        code=code,
        verdict=Verdict(status="passed", speedup=1.0),
    )
    same = score_rules(code, ok, CoderStage.optimize_performance, plan, prev)
    assert same.compliance.score == 1  # unchanged code is not an optimization
    faster = score_rules(
        code + "\n",
        Verdict(status="passed", speedup=1.5),
        CoderStage.optimize_performance,
        plan,
        prev.model_copy(update={"code": "x"}),
    )
    assert faster.compliance.score == 5


@pytest.mark.parametrize("code", ["lazy-tensor", "cpu-compute", "input-mutation"])
def test_every_static_hack_rule_counts_as_a_hack(tmp_path, code):
    """The rules added for disguised cheating cost the anti-hacking score like the older ones."""
    plan = plan_from_analysis(fake_analysis(tmp_path, None))
    hack = Finding(path="c.py", line=3, severity=Severity.error, code=f"stitch.{code}", message="x")
    v = Verdict(status="passed", speedup=1.0, diagnostics=[hack])
    r = score_rules(candidate("VERDICT passed"), v, CoderStage.draft, plan, None)
    assert r.major_hack and reward(r, v, CoderStage.draft) == 0.0


def test_coverage_reports_the_measured_share_of_custom_kernels(tmp_path):
    """Attribution from the Verifier reaches the rubric: a fused program keeping its GEMM on
    cuBLAS is legitimate, and the coverage item says how much of the time is its own."""
    from stitch_lsp.agents.verifier import to_verdict
    from stitch_lsp.models.verify import Attribution, KernelShare, VerifyResult, VerifyStatus

    shares = Attribution(
        gpu_ms=0.2,
        own=0.18,
        vendor=0.82,
        top={"vendor": [KernelShare(name="nvjet_tst_128x256", ms=0.16, calls=1, share=0.82)]},
    )
    v = to_verdict(VerifyResult(status=VerifyStatus.passed, attribution=shares), compile_only=False)
    assert v.custom_share == pytest.approx(0.18)
    assert v.attribution == "custom kernels: 18% of GPU time (vendor 82%: nvjet_tst_128x256)"
    assert v.timeline is not None and v.attribution in v.timeline  # the Coder reads it too
    plan = plan_from_analysis(fake_analysis(tmp_path, None))
    r = score_rules(candidate("VERDICT passed"), v, CoderStage.draft, plan, None)
    assert r.coverage.reasons[-1] == v.attribution
