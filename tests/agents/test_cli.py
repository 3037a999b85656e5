"""`stitch-lsp generate` end to end on a machine without a GPU: the real Planner worker, the
real Verifier in compile-only mode (nvcc), and scripted replies from a loopback endpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stitch_lsp.cli.main import main
from stitch_lsp.runtime.fastcuda import find_nvcc
from tests.agents.fake_openai import FakeOpenAI

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parent / "data"


def _fenced(code: str) -> str:
    return f"One fused kernel.\n\n```python\n{code}```\n"


def test_refuses_to_overwrite_an_existing_output(reference, tmp_path, capsys):
    out = tmp_path / "mine.py"
    out.write_text("keep me")
    assert main(["generate", str(reference), "-o", str(out), "--verify", "compile"]) == 2
    assert "never overwrites" in capsys.readouterr().err
    assert out.read_text() == "keep me"


def test_full_verification_needs_a_gpu(reference, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hide any GPU, as on a CPU-only machine
    assert main(["generate", str(reference), "--coder", "builtin", "--verify", "full"]) == 2
    err = capsys.readouterr().err
    assert "No CUDA GPU" in err and "--verify compile" in err


def test_llm_coder_needs_an_endpoint(reference, monkeypatch, capsys):
    monkeypatch.delenv("STITCH_LLM_BASE_URL", raising=False)
    assert main(["generate", str(reference), "--coder", "llm", "--verify", "compile"]) == 2
    assert "--base-url" in capsys.readouterr().err


@pytest.mark.skipif(
    find_nvcc() is None, reason="nvcc not found: compile-only verification needs it"
)
def test_compile_error_is_repaired_and_written(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    (tmp_path / "scale_relu_stitch.py").write_text("# someone else's file\n")
    good = (DATA / "scale_relu_candidate.py").read_text()
    bad = good.replace(
        "(long long)blockIdx.x * blockDim.x", "(long long)blockIdy.x * blockDim.x", 1
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
                "--verify",
                "compile",
                "--json",
                "--trajectories-dir",
                str(tmp_path / "traj"),
            ]
        )
        prompts = endpoint.script.prompts("coder")
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert rc == 0, out.err
    first, second = result["attempts"]
    assert first["verdict"]["status"] == "compile_error"
    assert any(
        d["line"] == bad_line and "blockIdy" in d["message"]
        for d in first["verdict"]["diagnostics"]
    ), first["verdict"]["diagnostics"]
    assert f"line {bad_line}:" in prompts[1]
    assert second["verdict"]["status"] == "compiled" and second["reward"] is None
    assert "NOT verified" in result["message"]
    written = Path(result["output"])
    assert written.name == "scale_relu_stitch_2.py"  # the existing file was left alone
    assert (tmp_path / "scale_relu_stitch.py").read_text() == "# someone else's file\n"
    lines = written.read_text().splitlines()
    assert lines[0] == "# stitch-lsp: reference=scale_relu.py"
    assert "\n".join(lines[1:]) + "\n" == good
    recs = [
        json.loads(x)
        for f in (tmp_path / "traj").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [r["verify"]["status"] for r in recs] == ["compile_error", "compiled"]
