"""The loop against a scripted OpenAI-compatible endpoint on 127.0.0.1 and a scripted Verifier."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from stitch_lsp.agents.coder import LLMCoder
from stitch_lsp.agents.llm import ChatClient
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import CoderStage
from tests.agents.fake_openai import Fail, FakeOpenAI
from tests.agents.helpers import FakeVerifier, fake_analysis, records, reply


def make_loop(
    endpoint: FakeOpenAI,
    reference: Path,
    tmp_path: Path,
    *,
    cancel: threading.Event | None = None,
    progress: list[str] | None = None,
    judge: bool = False,
    compile_only: bool = False,
    **settings: object,
) -> tuple[GenerationLoop, FakeVerifier]:
    values = {"llm_base_url": endpoint.base_url, "llm_model": "test-model", "llm_timeout_s": 2.0}
    s = Settings.from_sources(**{**values, **settings})
    cancel = cancel or threading.Event()
    client = ChatClient(s, retries=2, backoff_s=0.01, cancel=cancel)
    verifier = FakeVerifier()
    opts = LoopOptions(
        compile_only=compile_only, use_judge=judge, trajectories_dir=tmp_path / "traj"
    )
    loop = GenerationLoop(
        reference,
        s,
        LLMCoder(client),
        verifier,
        client=client,
        options=opts,
        analyze=fake_analysis,
        cancel=cancel,
        progress=(progress.append if progress is not None else None),
    )
    return loop, verifier


def test_compile_error_reaches_the_repair_prompt(endpoint, reference, tmp_path):
    endpoint.script.coder.extend(
        [
            reply("VERDICT compile_error LINE 7 MSG identifier 'blockIdy' is undefined"),
            reply("VERDICT passed 1.5"),
        ]
    )
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()

    assert result.stopped == "target_met"
    assert [a.stage for a in result.attempts] == [CoderStage.draft, CoderStage.repair_compile]
    assert result.best_index == 2 and result.best.accepted
    first, second = endpoint.script.prompts("coder")
    assert "Implement this PyTorch reference" in first
    assert "line 7:1 error [nvcc] identifier 'blockIdy' is undefined" in second
    assert "VERDICT compile_error" in second  # the broken code is quoted back
    # the planner was asked once, and its empty answer kept the analysis plan
    assert len(endpoint.script.prompts("planner")) == 1

    recs = records(tmp_path)
    assert [r["stage"] for r in recs] == ["draft", "repair_compile"]
    assert recs[0]["messages"][-1]["role"] == "assistant"
    assert recs[0]["messages"][-1]["content"] == recs[0]["reply"]
    assert recs[0]["reward"] == 0.0 and recs[0]["correct"] is False
    assert recs[1]["correct"] is True and recs[1]["reward"] > 0
    assert recs[1]["metadata"]["accepted"] is True
    assert recs[1]["rubric"]["total"] == sum(
        recs[1]["rubric"][k]["score"]
        for k in ("anti_hacking", "engineering", "coverage", "compliance")
    )


def test_replan_after_two_build_failures(endpoint, reference, tmp_path):
    endpoint.script.coder.extend(
        [
            reply("VERDICT compile_error LINE 3 MSG expected a ';'"),
            reply("VERDICT compile_error LINE 4 MSG too few arguments"),
            reply("VERDICT passed 1.2"),
        ]
    )
    endpoint.script.planner.extend(
        [
            "{}",
            json.dumps(
                {
                    "summary": "Split into two simple kernels; no templates this time.",
                    "steps": ["relu kernel", "scale kernel"],
                    "avoid": ["templated fused kernel"],
                }
            ),
        ]
    )
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()

    assert result.replans == 1
    plans = endpoint.script.prompts("planner")
    assert len(plans) == 2
    replan = plans[1]
    assert "the last 2 attempts failed to compile" in replan
    assert "attempt 1 (draft, plan rev 0): compile_error: line 3: expected a ';'" in replan
    assert "attempt 2 (repair_compile, plan rev 0): compile_error" in replan
    third = result.attempts[2]
    assert third.stage is CoderStage.draft and third.plan_revision == 1
    coder_prompts = endpoint.script.prompts("coder")
    assert "Split into two simple kernels" in coder_prompts[2]
    assert "templated fused kernel" in coder_prompts[2]  # the avoid list reaches the Coder


def test_replan_after_two_wrong_results_without_llm_planner_answer(endpoint, reference, tmp_path):
    endpoint.script.coder.extend(
        [
            reply("VERDICT incorrect MSG trial 0: max abs error 0.25"),
            reply("VERDICT incorrect"),
            reply("VERDICT passed 1.1"),
        ]
    )
    endpoint.script.planner.extend(["{}", "not json at all"])
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()

    assert result.replans == 1
    assert "compiled but were wrong" in endpoint.script.prompts("planner")[1]
    assert "trial 0: max abs error 0.25" in endpoint.script.prompts("coder")[1]
    # an unusable replan answer falls back to the rule-based revision, which records the failure
    third = result.attempts[2]
    assert third.plan_revision == 1
    assert "one operator each" in endpoint.script.prompts("coder")[2]
    assert "rev 0:" in endpoint.script.prompts("coder")[2]


def test_replan_when_correct_attempts_stall_and_best_is_kept(endpoint, reference, tmp_path):
    endpoint.script.coder.extend(
        [
            reply("VERDICT passed 0.80"),
            reply("VERDICT passed 0.82"),
            reply("VERDICT passed 0.95"),
            reply("VERDICT incorrect"),
        ]
    )
    loop, verifier = make_loop(endpoint, reference, tmp_path, max_attempts=4, target_speedup=2.0)
    result = loop.run()
    # each version an optimization starts from is profiled once; the last attempt is not
    assert [c.split("\n")[2] for c in verifier.profiled] == [
        "# VERDICT passed 0.80",
        "# VERDICT passed 0.82",
        "# VERDICT passed 0.95",
    ]

    assert result.stopped == "budget"
    assert result.replans == 1
    assert "within 5% of each other" in endpoint.script.prompts("planner")[1]
    stages = [a.stage for a in result.attempts]
    assert stages[1:] == [CoderStage.optimize_performance] * 3
    assert result.best_index == 3
    assert [a.accepted for a in result.attempts] == [False, False, True, False]
    # the optimization prompt carries timings and the profiler's hint
    opt = endpoint.script.prompts("coder")[1]
    assert "speedup 0.80x" in opt and "- profiler: k0: UncoalescedGlobalAccess" in opt
    assert "Profile: k0 5.0 us, memory-bound" in opt
    # attempt 4 optimizes the best correct version (attempt 3), not the last one
    assert "VERDICT passed 0.95" in endpoint.script.prompts("coder")[3]
    assert "missed" in result.message and "attempt 3/4" in result.message


def test_judge_scores_are_averaged_with_the_rules(endpoint, reference, tmp_path):
    endpoint.script.coder.append(reply("VERDICT passed 2.0"))
    endpoint.script.judge.append(
        json.dumps(
            {"anti_hacking": 5, "engineering": 1, "coverage": 5, "compliance": 5, "reasons": {}}
        )
    )
    loop, _ = make_loop(endpoint, reference, tmp_path, judge=True)
    result = loop.run()
    rub = result.attempts[0].rubric
    assert rub is not None and rub.judge == "rules+llm"
    assert any(r.startswith("judge: 1/5") for r in rub.engineering.reasons)
    assert len(endpoint.script.prompts("judge")) == 1


def test_unreachable_endpoint_ends_cleanly(reference, tmp_path):
    dead = FakeOpenAI()  # bound but never served: connections are refused after close
    dead.httpd.server_close()
    loop, _ = make_loop(dead, reference, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint"
    assert "cannot reach" in result.message and "after 3 tries" in result.message
    assert result.attempts == [] and result.output is None
    assert not (tmp_path / "traj").exists()


def test_server_errors_are_retried_then_end_the_run(endpoint, reference, tmp_path):
    endpoint.script.coder.extend([Fail(503), reply("VERDICT passed 1.5")])
    loop, _ = make_loop(endpoint, reference, tmp_path)
    assert loop.run().stopped == "target_met"  # one 503, then the retry succeeds

    endpoint.script.coder.extend([Fail(500), Fail(500), Fail(500)])
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint"
    assert "HTTP 500" in result.message and "nothing was written" in result.message


def test_client_errors_are_not_retried(endpoint, reference, tmp_path):
    endpoint.script.coder.append(Fail(404, text="model 'test-model' not found"))
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint"
    assert "HTTP 404" in result.message and "model 'test-model' not found" in result.message
    assert len(endpoint.script.prompts("coder")) == 1


def test_timeout_ends_the_run(endpoint, reference, tmp_path):
    endpoint.script.coder.extend([Fail(hang_s=3.0)] * 3)
    loop, _ = make_loop(endpoint, reference, tmp_path, llm_timeout_s=1.0)
    loop.client.retries = 0  # type: ignore[union-attr]
    result = loop.run()
    assert result.stopped == "endpoint"
    assert "did not answer within 1 s" in result.message


def test_truncated_reply_ends_the_run(endpoint, reference, tmp_path):
    endpoint.script.coder.append(Fail(truncated=True, text="```python\nimport torch\n"))
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint"
    assert "finish_reason=length" in result.message and "llmMaxTokens" in result.message


def test_replies_without_code(endpoint, reference, tmp_path):
    endpoint.script.coder.extend(["I would write a kernel.", reply("VERDICT passed 1.3")])
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()
    assert [a.verdict.status for a in result.attempts] == ["no_code", "passed"]
    assert result.best_index == 2

    endpoint.script.coder.extend(["Sorry.", "Still no code."])
    loop, _ = make_loop(endpoint, reference, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint" and result.best is None
    assert "2 times without a usable code block" in result.message


def test_cancel_during_verification(endpoint, reference, tmp_path):
    endpoint.script.coder.extend([reply("VERDICT passed 0.5"), reply("VERDICT passed 0.6")])
    cancel = threading.Event()
    progress: list[str] = []

    class Cancelling(list):
        def append(self, msg: str) -> None:
            super().append(msg)
            if msg == "Verifying":
                cancel.set()

    progress = Cancelling()
    loop, _ = make_loop(endpoint, reference, tmp_path, cancel=cancel, progress=progress)
    result = loop.run()
    assert result.stopped == "cancelled"
    assert result.best is None and "nothing was written" in result.message
    assert progress[:2] == ["Planning", "Coding attempt 1/5"]


def test_compile_only_accepts_first_clean_build(endpoint, reference, tmp_path):
    endpoint.script.coder.extend([reply("VERDICT compile_error LINE 2"), reply("VERDICT passed")])
    loop, verifier = make_loop(endpoint, reference, tmp_path, compile_only=True)
    result = loop.run()
    assert all(c for _, c in verifier.calls)
    assert result.best_index == 2 and result.verify_mode == "compile"
    assert "NOT verified" in result.message
    assert result.attempts[1].reward is None  # correctness unknown: no reward
    assert records(tmp_path)[1]["correct"] is None


def test_optimize_starts_from_the_current_version(endpoint, reference, tmp_path):
    from tests.agents.helpers import candidate

    endpoint.script.coder.extend([reply("VERDICT passed 1.6"), reply("VERDICT passed 2.2")])
    loop, verifier = make_loop(endpoint, reference, tmp_path, max_attempts=2)
    loop.opt.start_from = candidate("VERDICT passed 2.0")
    result = loop.run()
    # the user's version is verified first, then improved on; 1.6x does not beat it
    assert len(verifier.calls) == 3
    first = endpoint.script.prompts("coder")[0]
    assert "runs at 2.00x over PyTorch eager" in first and "VERDICT passed 2.0" in first
    assert [a.stage for a in result.attempts] == [CoderStage.optimize_performance] * 2
    assert result.baseline_speedup == 2.0 and result.best_index == 2
    assert len(records(tmp_path)) == 2  # the user's version is not a Coder attempt

    endpoint.script.coder.extend([reply("VERDICT passed 1.1")])
    loop, _ = make_loop(endpoint, reference, tmp_path / "second", max_attempts=1)
    loop.opt.start_from = candidate("VERDICT passed 2.0")
    result = loop.run()
    assert result.best is None
    assert "no attempt beat the current version (2.00x)" in result.message


def test_cancel_interrupts_a_slow_request(endpoint, reference, tmp_path):
    import time

    endpoint.script.coder.append(Fail(hang_s=1.5))
    cancel = threading.Event()
    loop, _ = make_loop(endpoint, reference, tmp_path, cancel=cancel, llm_timeout_s=30.0)
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    result = loop.run()
    assert result.stopped == "cancelled"
    assert time.monotonic() - started < 1.2  # did not wait for the reply
