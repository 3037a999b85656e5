"""The Planner: the torch worker's analysis of a real KernelBench problem, plans and replans."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.agents.planner import (
    PlannerError,
    analyze_reference,
    describe_analysis,
    plan_from_analysis,
    replan,
)
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import Attempt, CoderStage, Verdict

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

pytest.importorskip("torch")


def test_worker_analyses_gemm_with_a_tail(kernelbench_dir: Path) -> None:
    ref = kernelbench_dir / "level2" / "12_Gemm_Multiply_LeakyReLU.py"
    a = analyze_reference(ref, Settings.from_sources(), profile=False)
    assert a.graph_method == "fx"
    assert [(o.node, o.op) for o in a.ops] == [
        ("gemm", "Linear"),
        ("mul", "mul"),
        ("leaky_relu", "LeakyReLU"),
    ]
    gemm = a.ops[0]
    assert gemm.flops == pytest.approx(2 * 1024 * 8192 * 8192)
    assert gemm.bound == "compute"
    assert a.inputs[0].shape == [1024, 8192] and a.outputs[0].shape == [1024, 8192]
    # perfect fusion moves x, W, b and y once: 32 MiB + 256 MiB + 32 KiB + 32 MiB
    assert a.fused_bytes == pytest.approx(4 * (1024 * 8192 * 2 + 8192 * 8192 + 8192))
    assert a.fused_floor_ms <= a.unfused_floor_ms
    assert not a.hardware.present and "assumed" in a.hardware.source

    plan = plan_from_analysis(a)
    assert len(plan.fusion_groups) == 1
    group = plan.fusion_groups[0]
    assert group.anchor == "gemm" and group.ops == ["gemm", "mul", "leaky_relu"]
    assert "epilogue" in plan.steps[0]
    assert plan.expected_bottlenecks[0].startswith("gemm (Linear, compute-bound)")
    assert any("TF32" in r for r in plan.correctness_risks)
    assert "fused floor" in describe_analysis(a)


def test_worker_failure_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(PlannerError, match="missing get_inputs, get_init_inputs"):
        analyze_reference(bad, Settings.from_sources())


def test_rule_based_replan_splits_groups_and_remembers_failure(kernelbench_dir: Path) -> None:
    from tests.agents.helpers import fake_analysis

    plan = plan_from_analysis(fake_analysis(kernelbench_dir, None))
    history = [
        Attempt(
            index=i,
            stage=CoderStage.draft,
            coder="llm",
            code="x",
            verdict=Verdict(status="incorrect", correctness="max abs error 1"),
        )
        for i in (1, 2)
    ]
    new, messages, reply = replan(
        plan,
        history,
        "the last 2 attempts compiled but were wrong",
        client=None,
        reference_name="r.py",
        reference="",
    )
    assert messages is None and reply is None
    assert new.revision == 1
    assert [g.ops for g in new.fusion_groups] == [["relu"], ["mul"]]
    assert new.avoid and "compiled but were wrong" in new.avoid[0]
    stalled, _, _ = replan(
        new, history, "within 5% of each other", client=None, reference_name="r.py", reference=""
    )
    assert stalled.revision == 2 and len(stalled.avoid) == 2
    assert "bottleneck" in stalled.summary
