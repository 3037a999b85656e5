"""Step by step with the real Planner worker, the real builtin generator and the real Verifier in
compile-only mode (nvcc, no GPU): the scaffold, the subtasks, the builtin seeding and splicing,
and what `stitch-lsp generate` prints and writes. Scripted Coder replies on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from stitch_lsp.agents import partial
from stitch_lsp.agents.planner import analyze_reference, plan_from_analysis
from stitch_lsp.agents.subtasks import plan_subtasks
from stitch_lsp.cli.main import main
from stitch_lsp.config import Settings
from tests.agents.fake_openai import FakeOpenAI

pytestmark = pytest.mark.slow  # workers, nvcc

pytest.importorskip("torch")
DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(DATA))
import conv3_steps  # noqa: E402
import mlp3_steps  # noqa: E402


def _nvcc() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: compile-only verification cannot build")


def test_the_worker_writes_a_scaffold_with_source_lines(tmp_path: Path) -> None:
    ref = Path(shutil.copy(DATA / "mlp3.py", tmp_path / "mlp3.py"))
    analysis = analyze_reference(ref, Settings.from_sources())
    assert [(o.node, o.line) for o in analysis.ops] == [
        ("fc1", 16),
        ("relu", 16),
        ("fc2", 17),
        ("tanh", 17),
        ("mul", 17),
        ("fc3", 18),
        ("sigmoid", 18),
    ]
    sc = analysis.scaffold
    assert sc is not None and sc.signature.startswith("def forward(self, x")
    assert [s.code for s in sc.statements][:2] == ["fc1 = self.fc1(x)", "relu = torch.relu(fc1)"]
    assert sc.statements[2].args == ["relu"] and sc.output_args == ["sigmoid"]
    subtasks, note = plan_subtasks(plan_from_analysis(analysis))
    assert note is None
    assert [(s.group, s.label, s.inputs, s.outputs) for s in subtasks] == [
        ("k1", "linear+relu", ["x"], ["relu"]),
        ("k2", "linear+tanh+mul", ["relu"], ["mul"]),
        ("k3", "linear+sigmoid", ["mul"], ["sigmoid"]),
    ]
    assert subtasks[1].bottleneck.startswith("fc2 (Linear, compute-bound)")
    program = partial.compose(sc, subtasks)
    assert partial.find_block(program, "k2") is not None
    compile(program, "scaffold", "exec")  # the all-PyTorch program is valid Python


def test_a_nested_network_gets_a_checked_scaffold(kernelbench_dir: Path) -> None:
    ref = kernelbench_dir / "level3" / "8_ResNetBasicBlock.py"
    analysis = analyze_reference(ref, Settings.from_sources())
    assert analysis.scaffold is not None, analysis.notes
    subtasks, _ = plan_subtasks(plan_from_analysis(analysis))
    assert [s.label for s in subtasks] == ["conv+bn+relu", "conv+bn", "conv+bn+add+relu"]
    assert subtasks[2].inputs == ["x", "bn2"]  # the shortcut reads the block's input
    text = partial.compose(analysis.scaffold, subtasks)
    assert "downsample_0 = getattr(self.downsample, '0')(x)  # line 42" in text


def test_generate_builds_step_by_step_and_writes_the_built_program(tmp_path: Path, capsys) -> None:
    """Compile-only: each subtask's partial program is built by nvcc; subtask 2's first version
    does not compile and is repaired inside its subtask. Without a GPU nothing can be timed, so
    the program the subtasks built is the one written."""
    _nvcc()
    ref = Path(shutil.copy(DATA / "mlp3.py", tmp_path / "mlp3.py"))
    replies = [
        mlp3_steps.fenced(mlp3_steps.partial({1})),
        mlp3_steps.fenced(mlp3_steps.partial({1, 2}, broken=True)),
        mlp3_steps.fenced(mlp3_steps.partial({1, 2})),
        mlp3_steps.fenced(mlp3_steps.partial({1, 2, 3})),
    ]
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend(replies)
        rc = main(
            [
                "generate", str(ref), "--coder", "llm", "--base-url", endpoint.base_url,
                "--model", "scripted", "--verify", "compile", "--no-seed",
                "--trajectories-dir", str(tmp_path / "traj"), "--json",
            ]
        )  # fmt: skip
        prompts = endpoint.script.prompts("coder")
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert rc == 0, out.err
    statuses = [a["verdict"]["status"] for a in result["attempts"]]
    assert statuses == ["compiled", "compile_error", "compiled", "compiled"]
    assert [a["subtask"]["index"] for a in result["attempts"]] == [1, 2, 2, 3]
    errors = result["attempts"][1]["verdict"]["diagnostics"]
    assert any("blockIdy" in d["message"] for d in errors)
    assert "blockIdy" in prompts[2] and "Subtask 2/3: linear+tanh+mul" in prompts[2]
    # the first prompt carries the scaffold the worker checked, with its blocks
    assert "# >>> stitch k3 · subtask 3/3: linear+sigmoid" in prompts[0]
    written = Path(result["output"]).read_text()
    assert written == "# stitch-lsp: reference=mlp3.py\n" + mlp3_steps.partial({1, 2, 3})
    # the CLI lists the subtasks and how they ended; progress names them
    assert "1/3 k1 linear+relu: done (attempt 1)" in out.err
    assert "2/3 k2 linear+tanh+mul: done (attempts 2, 3)" in out.err
    assert "Subtask 2/3: linear+tanh+mul, attempt 2/3" in out.err
    assert "attempt 3 [subtask 2/3 linear+tanh+mul, attempt 2/3] [repair_compile]" in out.err
    recs = [
        json.loads(x)
        for f in (tmp_path / "traj").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [r["subtask"]["group"] for r in recs] == ["k1", "k2", "k2", "k3"]
    assert [r["partial"] for r in recs] == [True, True, True, False]
    # export keeps the new fields
    exported = tmp_path / "all.jsonl"
    assert main(["export-trajectories", str(tmp_path / "traj"), "-o", str(exported)]) == 0
    first = json.loads(exported.read_text().splitlines()[0])
    assert first["subtask"]["label"] == "linear+relu" and first["phase"] == "subtask"


def test_the_builtin_generator_seeds_the_groups_it_handles(tmp_path: Path, capsys) -> None:
    """conv3_scan.py: the generator refuses logcumsumexp, so not the whole model, but it handles
    conv+relu and conv+sigmoid: their code is spliced into their blocks and builds; the LLM
    writes the logcumsumexp group (a build error, then its repair)."""
    _nvcc()
    ref = Path(shutil.copy(DATA / "conv3_scan.py", tmp_path / "conv3_scan.py"))
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend(
            [lambda p: conv3_steps.write_scan_group(p, broken=True), conv3_steps.repair]
        )
        rc = main(
            [
                "generate", str(ref), "--coder", "llm", "--base-url", endpoint.base_url,
                "--model", "scripted", "--verify", "compile",
                "--trajectories-dir", str(tmp_path / "traj"), "--json",
            ]
        )  # fmt: skip
        prompts = endpoint.script.prompts("coder")
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert rc == 0, out.err
    got = [(a["coder"], a["subtask"]["index"], a["verdict"]["status"]) for a in result["attempts"]]
    assert got == [
        ("builtin", 1, "compiled"),
        ("llm", 2, "compile_error"),
        ("llm", 2, "compiled"),
        ("builtin", 3, "compiled"),
    ]
    assert [s["status"] for s in result["subtasks"]] == ["seeded", "done", "seeded"]
    assert "relu = _stitch_k1_group(self)(x)" in prompts[0]  # subtask 2 starts from the splice
    written = Path(result["output"]).read_text()
    assert "sigmoid = _stitch_k3_group(self)(logcumsumexp)" in written
    assert "logcumsumexp = _row_logcumsumexp(conv2)" in written
    assert "1/3 k1 conv+relu: done by the builtin generator (attempt 1)" in out.err
