"""The builtin coder in the loop: one deterministic draft, verified, then the loop stops."""

from __future__ import annotations

from stitch_lsp.agents.coder import BuiltinCoder, BuiltinDraft
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions
from stitch_lsp.config import Settings
from tests.agents.helpers import FakeVerifier, candidate, fake_analysis


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
