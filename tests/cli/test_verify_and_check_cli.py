"""`verify` and `check` as a new user meets them (issue 27): a .cu candidate refused in one
line, a CUDA syntax error reported as an error, a Python syntax error as a compile error, and
progress lines while a long stage runs."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from stitch_lsp.analysis import Document, analyze
from stitch_lsp.server.convert import finding_to_diagnostic
from stitch_lsp.verify import progress_lines
from stitch_lsp.verify.progress_lines import ProgressLines

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "examples" / "layernorm_gelu.py"
CUDA_TYPO = "__global__ void k(float* x) {\n  int i = threadIdx.x\n  x[i] = 1.0f;\n}\n"


def stitch(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with no GPU visible and stdout and stderr piped."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for name in ("STITCH_DEBUG", "COLUMNS"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "stitch_lsp", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_cu_candidate_is_refused_up_front_in_one_line(tmp_path: Path, as_json: bool) -> None:
    (tmp_path / "typo.cu").write_text(CUDA_TYPO)
    fmt = ["--format", "json"] if as_json else []
    proc = stitch("verify", str(REFERENCE), "typo.cu", *fmt, cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "typo.cu is a .cu file" in line
    assert "Python file that defines ModelNew" in line and "load_inline" in line
    assert "Traceback" not in proc.stderr + proc.stdout
    if as_json:
        assert json.loads(proc.stdout)["error"] == line
    else:
        assert proc.stdout == ""


@pytest.mark.parametrize(
    ("name", "kind"),
    [("kernel.cuh", "a .cuh file"), ("solution.ipynb", "a .ipynb file"), ("cand", "not a .py")],
)
def test_any_candidate_that_is_not_a_py_file_is_refused(
    tmp_path: Path, name: str, kind: str
) -> None:
    (tmp_path / name).write_text("class ModelNew: pass\n")
    proc = stitch("verify", str(REFERENCE), name, cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    # the one line is the refusal: no stage began (a stage would print its own line)
    assert line.startswith(f"stitch-lsp verify: candidate {name} is {kind}"), line
    assert "Traceback" not in proc.stderr


def test_a_reference_that_is_not_python_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "ref.cu").write_text(CUDA_TYPO)
    proc = stitch("verify", "ref.cu", str(REFERENCE), cwd=tmp_path)
    assert proc.returncode == 2
    assert "a reference must be a Python file that defines Model" in proc.stderr


def test_check_reports_a_cuda_syntax_error_as_an_error(tmp_path: Path) -> None:
    (tmp_path / "typo.cu").write_text(CUDA_TYPO)
    proc = stitch("check", "typo.cu", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "typo.cu:3:3: error: this CUDA code does not parse" in proc.stdout
    assert "[stitch.parse-error]" in proc.stdout
    assert "1 file checked: 1 error" in proc.stdout


def test_the_editor_shows_a_cuda_syntax_error_as_an_error() -> None:
    result = analyze(Document("file:///w/typo.cu", CUDA_TYPO, "cuda-cpp"))
    (finding,) = [d for d in result.diagnostics if d.code == "stitch.parse-error"]
    assert finding_to_diagnostic(finding).severity == lsp.DiagnosticSeverity.Error


def test_a_valid_cu_file_has_no_parse_error() -> None:
    good = CUDA_TYPO.replace("threadIdx.x\n", "threadIdx.x;\n")
    result = analyze(Document("file:///w/good.cu", good, "cuda-cpp"))
    assert not [d for d in result.diagnostics if d.code == "stitch.parse-error"]


def test_a_python_syntax_error_in_a_candidate_is_a_compile_error(tmp_path: Path) -> None:
    (tmp_path / "cand.py").write_text("class ModelNew(:\n    pass\n")
    proc = stitch("verify", str(REFERENCE), "cand.py", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["status"] == "compile_error", out["status"]
    assert "does not parse" in out["error"] and "exploit" not in out["error"]
    text = stitch("verify", str(REFERENCE), "cand.py", cwd=tmp_path)
    assert text.stdout.startswith("status: compile_error")


def test_a_cheat_that_parses_is_still_an_exploit(tmp_path: Path) -> None:
    (tmp_path / "cand.py").write_text(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.nn.functional.gelu(x)\n"
    )
    proc = stitch("verify", str(REFERENCE), "cand.py", "--format", "json", cwd=tmp_path)
    assert json.loads(proc.stdout)["status"] == "exploit"


def test_a_long_stage_gets_a_still_line_every_interval() -> None:
    stream = io.StringIO()
    with ProgressLines(stream, interval=0.05) as lines:
        lines.stage("static checks")
        lines.stage("building")
        time.sleep(0.3)
    said = stream.getvalue().splitlines()
    assert said[0].startswith("verify: static checks (")
    assert said[1].startswith("verify: building with nvcc or load_inline (")
    beats = [s for s in said[2:] if s.startswith("verify: still building (")]
    assert len(beats) >= 2 and len(beats) == len(said) - 2
    assert beats[-1].endswith(" s)")


def test_no_still_line_after_the_run(tmp_path: Path) -> None:
    stream = io.StringIO()
    with ProgressLines(stream, interval=0.05) as lines:
        lines.stage("checking correctness")
    time.sleep(0.2)
    assert stream.getvalue().count("\n") == 1


AGENT_DATA = REPO / "tests" / "agents" / "data"


@pytest.mark.slow
def test_verify_is_never_silent_during_a_long_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real CLI and worker: the candidate's import (where load_inline builds) takes 4 s
    more than its nvcc build, and with the beat at 0.5 s the build is told again meanwhile."""
    pytest.importorskip("torch")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH: the candidate's build needs it")
    from stitch_lsp.cli.main import main

    monkeypatch.setattr(progress_lines, "HEARTBEAT_S", 0.5)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    # a build cache of its own: another test that built this candidate first would make the
    # build a cache hit, over before a beat (tests run in any order, in two workers)
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))
    ref = Path(shutil.copy(AGENT_DATA / "scale_relu.py", tmp_path / "ref.py"))
    cand = tmp_path / "cand.py"
    honest = (AGENT_DATA / "scale_relu_candidate.py").read_text()
    cand.write_text(f"import time\n\ntime.sleep(4)  # a slow build at import\n{honest}")
    main(["verify", str(ref), str(cand)])
    err = capsys.readouterr().err.splitlines()
    stages = [line.split(" (")[0] for line in err if line.startswith("verify: ")]
    # the stages in order; a beat may come between them (a worker slow to start on a busy
    # machine is told "still starting the worker" first)
    steps = [s for s in stages if not s.startswith("verify: still ")]
    assert steps[:3] == [
        "verify: static checks",
        "verify: starting the worker",
        "verify: importing the reference and the candidate",
    ], err
    building = "verify: building with nvcc or load_inline"
    assert building in stages
    after = stages[stages.index(building) + 1 :]
    assert after.count("verify: still building") >= 2, err
