"""`stitch-lsp check` and `check_paths`: output formats, exit codes and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stitch_lsp.analysis import Document, analyze, check_paths
from stitch_lsp.cli.main import main
from stitch_lsp.config import Settings

from .conftest import DATA, REPO

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)


def test_examples_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "check",
            str(REPO / "examples" / "gemm_add_relu.py"),
            str(REPO / "examples" / "relu_bias_inline.py"),
            str(REPO / "examples" / "kernels" / "saxpy.cu"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "3 files checked: 0 errors, 0 warnings" in out


def test_honest_solutions_have_no_warnings() -> None:
    paths = sorted(DATA.glob("honest_*.py"))
    assert len(paths) >= 3
    report = check_paths(paths)
    serious = [d for d in report.diagnostics if d.severity.value in ("error", "warning")]
    assert serious == [], serious


def test_text_output_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(DATA / "bad_pure_pytorch.py")])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    first = out[0]
    assert first.startswith(f"{DATA / 'bad_pure_pytorch.py'}:7:17: warning: ")
    assert first.endswith("[stitch.kernel-unused]")
    assert out[-1] == "1 file checked: 4 errors, 1 warning, 0 infos"


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", "--format", "json", str(DATA / "bad_kernels.cu")])
    payload = json.loads(capsys.readouterr().out)
    assert rc == 0  # warnings and hints only
    diags = payload["diagnostics"]
    assert {d["code"] for d in diags} == {
        "stitch.kernel-unused",
        "stitch.block-size",
        "stitch.launch-unchecked",
    }
    assert all({"path", "line", "column", "severity", "code", "message"} <= d.keys() for d in diags)


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "gone.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_vanished_file_is_reported_not_raised(tmp_path: Path) -> None:
    report = check_paths([tmp_path / "gone.py"])
    (finding,) = report.diagnostics
    assert finding.code == "stitch.file-missing" and finding.severity.value == "error"
    assert report.has_errors


def test_folder_walk_skips_hidden_and_venvs(tmp_path: Path) -> None:
    shutil.copy(DATA / "bad_kernels.cu", tmp_path / "a.cu")
    (tmp_path / "b.cuh").write_text("__global__ void k() {}\n")
    (tmp_path / "notes.txt").write_text("__global__")
    for skipped in (".git", "node_modules", "venv"):
        (tmp_path / skipped).mkdir()
        shutil.copy(DATA / "bad_pure_pytorch.py", tmp_path / skipped / "x.py")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    report = check_paths([tmp_path])
    assert {Path(d.path).name for d in report.diagnostics} == {"a.cu"}


BROKEN = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x)\n"
    "        return x +\n\ndef get_inputs():\n    return [torch.rand(4)]\n"
)


def test_parse_error_keeps_analysing(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN)
    result = analyze(Document.from_path(tmp_path / "broken.py"))
    errors = [d for d in result.diagnostics if d.code == "stitch.parse-error"]
    assert len(errors) == 1 and errors[0].line == 4
    assert "def forward(self, x)" in errors[0].message
    assert result.get_inputs is not None  # what parsed was still analysed


def test_many_errors_give_one_parse_diagnostic() -> None:
    src = "def f(:\n    pass\nx = = 1\nclass (:\n"
    result = analyze(Document("file:///e.py", src, "python"))
    assert len([d for d in result.diagnostics if d.code == "stitch.parse-error"]) == 1


def test_non_utf8_file(tmp_path: Path) -> None:
    p = tmp_path / "latin1.py"
    p.write_bytes("# café\nimport torch\n".encode("latin-1"))
    report = check_paths([p])
    (finding,) = report.diagnostics
    assert finding.code == "stitch.encoding" and (finding.line, finding.column) == (1, 6)


def test_huge_file_skips_deep_checks(tmp_path: Path) -> None:
    p = tmp_path / "big.py"
    p.write_text("class ModelNew:\n    def forward(self, x):\n        return x\n" + "# pad\n" * 400)
    report = check_paths([p], Settings(max_file_bytes=1000))
    (finding,) = report.diagnostics
    assert finding.code == "stitch.file-too-large" and finding.severity.value == "information"


def test_console_entry_point_runs() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "stitch_lsp",
            "check",
            str(REPO / "examples" / "kernels" / "saxpy.cu"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("1 file checked: 0 errors, 0 warnings, 0 infos")


def test_kernelbench_problems_are_clean(kernelbench_dir: Path) -> None:
    report = check_paths([kernelbench_dir])
    assert report.diagnostics == []


def test_server_process_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from stitch_lsp.analysis import Document, analyze, check_paths\n"
        f"check_paths([{str(DATA)!r}])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
