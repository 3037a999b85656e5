"""The builtin coder in the loop: one deterministic draft, verified, then the loop stops."""

from __future__ import annotations

import pytest

from stitch_lsp.agents.coder import BuiltinCoder, BuiltinDraft
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions
from stitch_lsp.config import Settings
from tests.agents.helpers import FakeVerifier, candidate, fake_analysis

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)


def _loop(reference, tmp_path, draft: BuiltinDraft, verifier: FakeVerifier) -> GenerationLoop:
    return GenerationLoop(
        reference,
        Settings.from_sources(max_attempts=5, target_speedup=9.0),
        BuiltinCoder(lambda: draft),
        verifier,
        options=LoopOptions(trajectories_dir=tmp_path / "traj"),
        analyze=fake_analysis,
    )


def test_builtin_draft_is_one_attempt(reference, tmp_path):
    verifier = FakeVerifier()
    draft = BuiltinDraft(True, candidate("VERDICT passed 1.4"), "1 fused group")
    result = _loop(reference, tmp_path, draft, verifier).run()
    assert result.stopped == "builtin_done"
    assert len(result.attempts) == 1 and len(verifier.calls) == 1
    assert result.best_index == 1 and result.coder == "builtin"
    # the record is still a chat transcript: the draft prompt and the generator's file
    rec = next((tmp_path / "traj").glob("*.jsonl")).read_text()
    assert "Implement this PyTorch reference" in rec and "1 fused group" in rec


def test_unhandled_module_ends_without_output(reference, tmp_path):
    verifier = FakeVerifier()
    draft = BuiltinDraft(False, None, "torch.nonzero has a data-dependent shape")
    result = _loop(reference, tmp_path, draft, verifier).run()
    assert verifier.calls == []
    assert result.best is None and result.attempts[0].verdict.status == "no_code"
    assert "data-dependent shape" in result.attempts[0].verdict.message
    assert "nothing was written" in result.message


def test_planning_without_torch_falls_back_to_a_source_only_plan(reference, tmp_path):
    from stitch_lsp.agents.planner import PlannerError

    def no_torch(*_a, **_k):
        raise PlannerError("planner analysis of r.py failed: No module named 'torch'")

    verifier = FakeVerifier()
    loop = _loop(reference, tmp_path, BuiltinDraft(True, candidate("VERDICT passed"), ""), verifier)
    loop.analyze = no_torch
    loop.opt.compile_only = True
    result = loop.run()
    assert result.best_index == 1
    rec = next((tmp_path / "traj").glob("*.jsonl")).read_text()
    assert "no graph analysis: torch is not installed for the workers" in rec

    def broken(*_a, **_k):
        raise PlannerError("planner analysis of r.py failed: missing get_inputs")

    loop = _loop(reference, tmp_path, BuiltinDraft(True, candidate("VERDICT passed"), ""), verifier)
    loop.analyze = broken
    result = loop.run()
    assert result.stopped == "error" and "missing get_inputs" in result.message


def test_a_failing_verifier_ends_the_run_with_its_error(reference, tmp_path):
    class Broken(FakeVerifier):
        def __call__(self, *args, **kwargs):
            raise OSError("worker python not found")

    draft = BuiltinDraft(True, candidate("VERDICT passed"), "")
    result = _loop(reference, tmp_path, draft, Broken()).run()
    assert result.stopped == "error" and result.best is None
    assert "OSError: worker python not found" in result.message
