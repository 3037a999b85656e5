"""`generate`, `bench` and `export-trajectories` as a new user meets them (issue 27): the
default `--verify auto`, output that a pipe gets whole, what a compile-only run ends with, the
records found where the run wrote them, and plain words when torch or cuBLAS is missing."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stitch_lsp.agents.bench import BenchReport, BenchRow, summarise
from stitch_lsp.agents.bench_command import _print_table
from stitch_lsp.agents.trajectory_folders import trajectory_folders
from stitch_lsp.cli.contract import PLAIN_WIDTH, console

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "layernorm_gelu.py"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def stitch(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with no GPU visible and stdout and stderr piped."""
    full = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    for name in ("STITCH_DEBUG", "COLUMNS"):
        full.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "stitch_lsp", *argv],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def site_python(tmp_path: Path, name: str, extra_pth: str) -> Path:
    """A Python for workers: a venv without pip that sees this one's packages, plus one
    startup line (`extra_pth`, run by `site` as a .pth file) that takes something away."""
    venv = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "a_ours.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    (site / "z_take_away.pth").write_text(extra_pth + "\n")
    return venv / "bin" / "python"


def test_help_says_verify_defaults_to_auto(tmp_path: Path) -> None:
    proc = stitch("generate", "--help", cwd=tmp_path)
    text = " ".join(proc.stdout.split())
    assert "auto (the default): full where a CUDA GPU is visible, else compile" in text


@pytest.mark.slow
@needs_nvcc
def test_a_default_generate_without_gpu_compiles_says_so_and_its_records_are_found(
    tmp_path: Path,
) -> None:
    """One run, as the Quick start's: no --verify (auto), stderr piped from a folder with a
    long path. It verifies by compiling, ends as `stopped: compiled`, prints every line whole,
    and an export from the folder above finds the records it wrote beside the reference."""
    pytest.importorskip("torch")
    project = tmp_path / ("a_folder_name_long_enough_that_paths_pass_eighty_columns_" * 2)
    examples = project / "examples"
    examples.mkdir(parents=True)
    ref = Path(shutil.copy(EXAMPLE, examples / EXAMPLE.name))
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    proc = stitch("generate", str(ref), "--coder", "builtin", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(
        line.startswith("note: No CUDA GPU")
        and line.endswith("correctness and speed will NOT be checked.")
        for line in lines
    ), lines
    assert any(line.endswith("· verify compile") for line in lines)
    (end,) = [line for line in lines if line.startswith("stopped: ")]
    assert end.startswith("stopped: compiled · attempt 1 compiled") and "NOT verified" in end
    written = examples / "layernorm_gelu_stitch.py"
    assert f"wrote {written}" in lines  # a path over 80 columns, on one line
    assert written.is_file()

    export = stitch("export-trajectories", cwd=project)
    assert export.returncode == 0, export.stderr
    records = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(records) == 1 and records[0]["metadata"]["reference"] == "layernorm_gelu.py"
    assert records[0]["metadata"]["verify_mode"] == "compile"
    assert "reading examples/.stitch/trajectories" in export.stderr
    assert "exported 1 record(s)" in export.stderr
    # the README's own export lines, verbatim, find the same folder
    for argv in readme_exports():
        shown = stitch(*argv, cwd=project)
        assert shown.returncode == 0, (argv, shown.stderr)
        assert "reading examples/.stitch/trajectories" in shown.stderr, (argv, shown.stderr)
        assert (project / argv[argv.index("-o") + 1]).is_file()


def readme_exports() -> list[list[str]]:
    """The `export-trajectories` command lines in README.md's shell blocks, after the program."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", readme, re.S):
        for line in block.splitlines():
            argv = shlex.split(line.split("#", 1)[0])
            if argv[:1] and argv[0].endswith("stitch-lsp") and argv[1:2] == ["export-trajectories"]:
                found.append(argv[1:])
    assert found, "README.md shows no export-trajectories command"
    return found


def test_an_export_with_no_records_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    proc = stitch("export-trajectories", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "no trajectory folder (.stitch/trajectories) here or in the folders below" in line


def test_the_default_export_finds_every_run_folder_once(tmp_path: Path) -> None:
    for where in ("", "examples", "tests/data/kernelbench/level2", "deep/a/b/c/d/e"):
        (tmp_path / where / ".stitch" / "trajectories").mkdir(parents=True)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("")
    (tmp_path / ".venv" / ".stitch" / "trajectories").mkdir(parents=True)
    (tmp_path / "node_modules" / ".stitch" / "trajectories").mkdir(parents=True)
    (tmp_path / ".git" / ".stitch" / "trajectories").mkdir(parents=True)
    found = trajectory_folders(tmp_path, ".stitch/trajectories")
    assert [f.relative_to(tmp_path).as_posix() for f in found] == [
        ".stitch/trajectories",
        "deep/a/b/c/d/e/.stitch/trajectories",
        "examples/.stitch/trajectories",
        "tests/data/kernelbench/level2/.stitch/trajectories",
    ]
    absolute = tmp_path / "examples" / ".stitch" / "trajectories"
    assert trajectory_folders(tmp_path / "deep", str(absolute)) == [absolute]


def no_torch_python(tmp_path: Path) -> Path:
    """A Python for workers that sees this venv's packages but cannot import torch."""
    blocker = (
        'import sys; exec("class _NoTorch:\\n def find_spec(self, name, path=None, '
        "target=None):\\n  if name == 'torch' or name.startswith('torch.'):\\n   raise "
        "ModuleNotFoundError(f\\\"No module named '{name}'\\\", name=name)\\n\\n"
        'sys.meta_path.insert(0, _NoTorch())")'
    )
    python = site_python(tmp_path, "no-torch", blocker)
    probe = subprocess.run([str(python), "-c", "import torch"], capture_output=True, text=True)
    assert "No module named 'torch'" in probe.stderr
    return python


@pytest.mark.slow
@needs_nvcc
def test_generate_without_torch_says_torch_is_missing(tmp_path: Path) -> None:
    python = no_torch_python(tmp_path)
    ref = Path(shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name))
    env = {"STITCH_PYTHON_FOR_WORKERS": str(python)}
    proc = stitch("generate", str(ref), "--coder", "builtin", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    (end,) = [line for line in proc.stderr.splitlines() if line.startswith("stopped: ")]
    assert "torch is not installed for the workers' Python" in end
    assert "pip install 'stitch-lsp[torch]'" in end and "STITCH_PYTHON_FOR_WORKERS" in end
    assert "does not handle this module" not in proc.stderr


@pytest.mark.slow
def test_bench_without_a_gpu_says_not_verified_in_the_correct_column(tmp_path: Path) -> None:
    """The README's claim, from the real command's piped table: a problem generated but not
    verified reads `not verified` under correct, on one row however long its name."""
    pytest.importorskip("torch")
    problems = tmp_path / "problems"
    problems.mkdir()
    name = "1_layernorm_gelu_with_a_name_long_enough_to_pass_eighty_columns_on_its_own"
    shutil.copy(EXAMPLE, problems / f"{name}.py")
    proc = stitch("bench", "problems", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "No CUDA GPU visible: candidates are generated, not verified." in proc.stdout
    header, row = [ln for ln in proc.stdout.splitlines() if ln.count("│") + ln.count("┃") > 3]
    columns = [c.strip() for c in header.strip("┃").split("┃")]
    cells = dict(zip(columns, [c.strip() for c in row.strip("│").split("│")], strict=True))
    assert cells["problem"] == name and cells["handled"] == "yes"
    assert cells["correct"] == "not verified"
    assert "coverage 1/1 (100%), correct 0/1" in proc.stdout


@pytest.mark.slow
def test_bench_without_torch_names_the_python_and_the_install(tmp_path: Path) -> None:
    """bench calls the builtin generator directly (no Coder in between): its note says that
    torch is missing, for which Python, and how to get it, not the worker's raw ImportError."""
    python = no_torch_python(tmp_path)
    problems = tmp_path / "problems"
    problems.mkdir()
    shutil.copy(EXAMPLE, problems / "1_layernorm_gelu.py")
    env = {"STITCH_PYTHON_FOR_WORKERS": str(python)}
    proc = stitch("bench", "problems", "--format", "json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["rows"]
    assert not row["handled"]
    assert row["reason"].startswith(f"torch is not installed for the workers' Python ({python}")
    assert "pip install 'stitch-lsp[torch]'" in row["reason"]
    assert "STITCH_PYTHON_FOR_WORKERS" in row["reason"]
    assert "cannot import torch" not in row["reason"]


def test_a_worker_that_dies_importing_torch_is_told_plainly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker that crashes on `import torch` before it answers: its log tail is not shown
    as a failure of the generator, but as torch missing."""
    import stitch_lsp.compiler as compiler
    from stitch_lsp.config import Settings
    from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind

    def crash(call, cancel=None):
        raise WorkerError(
            WorkerErrorKind.crashed,
            "the builtin generator exited with code 1",
            returncode=1,
            log_tail='Traceback (most recent call last):\n  File "x.py", line 1\n'
            "ModuleNotFoundError: No module named 'torch'\n",
        )

    monkeypatch.setattr(compiler, "run_worker", crash)
    ref = Path(shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name))
    settings = Settings.from_sources(python_for_workers="/opt/py/bin/python3")
    (item,) = compiler.generate_candidates([ref], settings)
    assert item.reason == compiler.torch_missing("/opt/py/bin/python3")
    assert "(/opt/py/bin/python3: No module named 'torch')" in item.reason
    assert "worker failed" not in item.reason


@pytest.mark.slow
@needs_nvcc
def test_compile_only_generate_without_cublas_headers_names_the_package(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from stitch_lsp.runtime import fastcuda

    nvcc = fastcuda.find_nvcc()
    if fastcuda.toolkit_has_cublas(fastcuda.toolkit_root(nvcc) if nvcc else None):
        pytest.skip("this toolkit has its own cuBLAS headers")
    python = site_python(
        tmp_path,
        "no-cublas",
        "import stitch_lsp.runtime.fastcuda as _f; _f.cublas_wheels = lambda: []",
    )
    ref = Path(shutil.copy(REPO / "examples" / "gemm_add_relu.py", tmp_path / "gemm.py"))
    env = {"STITCH_PYTHON_FOR_WORKERS": str(python), "STITCH_CACHE_DIR": str(tmp_path / "c")}
    proc = stitch(
        "generate", str(ref), "--coder", "builtin", "--verify", "compile", cwd=tmp_path, env=env
    )
    assert proc.returncode == 1
    (end,) = [line for line in proc.stderr.splitlines() if line.startswith("stopped: ")]
    assert "cublas_v2.h: No such file" in end and "`pip install nvidia-cublas`" in end


def test_a_piped_console_never_wraps(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = console()
    assert out.width == PLAIN_WIDTH
    long = "/" + "/".join(["folder_with_a_long_name"] * 12) + "/file.py"
    out.print(f"wrote {long}")
    assert capsys.readouterr().out == f"wrote {long}\n"
    monkeypatch.setenv("COLUMNS", "60")
    narrow = console()
    assert narrow.width == 60  # a width the user asked for is kept for tables
    narrow.print(f"wrote {long}")
    assert capsys.readouterr().out == f"wrote {long}\n"  # but a path is still never cut


def test_the_bench_table_says_what_stopped_the_check(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    long = "level2/" + "a_problem_with_a_name_far_longer_than_eighty_columns_" * 2
    rows = [
        BenchRow(problem=long, handled=True, status="not verified"),
        BenchRow(problem="crash", handled=True, status="runtime_error"),
        BenchRow(problem="wrong", handled=True, status="incorrect"),
        BenchRow(problem="ok", handled=True, correct=True, status="passed"),
        BenchRow(problem="skipped", handled=False, reason="unsupported op"),
    ]
    report = BenchReport(
        folder="f", coder="builtin", devices=[], date="d", rows=rows, summary=summarise(rows)
    )
    _print_table(report)
    table = capsys.readouterr().out
    cells = {
        line.split("│")[1].strip(): line.split("│")[3].strip()
        for line in table.splitlines()
        if line.count("│") > 3
    }
    assert cells[long] == "not verified"  # the long name, on one row
    assert cells["crash"] == "runtime error"
    assert cells["wrong"] == "no" and cells["ok"] == "yes" and cells["skipped"] == "-"
