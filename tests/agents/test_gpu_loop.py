"""The whole loop on a real GPU: scripted Coder replies, the real Planner worker and Verifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stitch_lsp.agents.planner import analyze_reference
from stitch_lsp.cli import main
from stitch_lsp.config import Settings
from tests.agents.fake_openai import FakeOpenAI

DATA = Path(__file__).resolve().parent / "data"

pytestmark = pytest.mark.gpu


def _fenced(code: str) -> str:
    return f"Fused relu and scale in one pass.\n\n```python\n{code}```\n"


def test_full_loop_repairs_a_build_error_and_verifies(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    good = (DATA / "scale_relu_candidate.py").read_text()
    bad = good.replace(
        "long long i = (long long)blockIdx.x", "long long i = (long long)blockIdy.x", 1
    )
    bad_line = next(i for i, line in enumerate(bad.splitlines(), 1) if "blockIdy" in line)
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([_fenced(bad), _fenced(good)])
        rc = main(
            [
                "generate",
                str(ref),
                "--coder",
                "llm",
                "--base-url",
                endpoint.base_url,
                "--model",
                "scripted",
                "--max-attempts",
                "3",
                "--target-speedup",
                "1.0",
                "--trajectories-dir",
                str(tmp_path / "traj"),
                "--json",
            ]
        )
        prompts = endpoint.script.prompts("coder")
    out = capsys.readouterr()
    print(out.err)
    result = json.loads(out.out)
    statuses = [a["verdict"]["status"] for a in result["attempts"]]
    assert statuses[0] == "compile_error"
    errors = result["attempts"][0]["verdict"]["diagnostics"]
    assert any("blockIdy" in d["message"] and d["line"] == bad_line for d in errors), errors
    assert f"line {bad_line}:" in prompts[1] and "blockIdy" in prompts[1]
    assert statuses[1] == "passed", result["attempts"][1]["verdict"]
    best = result["attempts"][1]
    assert best["verdict"]["speedup"] > 0 and best["reward"] > 0
    assert rc == (0 if result["output"] else 1)
    out_file = Path(result["output"])
    assert out_file.read_text().splitlines()[0] == "# stitch-lsp: reference=scale_relu.py"
    recs = [
        json.loads(x)
        for f in (tmp_path / "traj").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [r["correct"] for r in recs] == [False, True]
    print(f"speedup {best['verdict']['speedup']:.3f}x reward {best['reward']:.3f}")


def test_planner_profiles_the_reference_on_the_gpu(tmp_path: Path) -> None:
    ref = shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py")
    analysis = analyze_reference(Path(ref), Settings.from_sources(), profile=True)
    print(analysis.model_dump_json(indent=1))
    assert analysis.hardware.present
    assert analysis.eager_ms is not None and analysis.eager_ms > 0
    timed = [op for op in analysis.ops if op.measured_ms is not None]
    assert {op.op for op in timed} >= {"relu", "mul"}
    assert analysis.kernels, "torch.profiler saw no CUDA kernels"
    # two elementwise passes cost at least the fused floor
    assert analysis.eager_ms >= analysis.fused_floor_ms
