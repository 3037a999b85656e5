"""examples/README.md is true (issue 27): it names every example file, and its commands for a
machine without a GPU work there, verbatim."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
README = (EXAMPLES / "README.md").read_text(encoding="utf-8")


def example_files() -> list[str]:
    return sorted(
        p.relative_to(EXAMPLES).as_posix()
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts
        and not any(part.startswith(".") for part in p.relative_to(EXAMPLES).parts)
        and not p.stem.endswith(("_stitch", "_standalone"))
    )  # fmt: skip


def no_gpu_commands() -> list[list[str]]:
    """The lines of the first bash block, the one for a machine without a GPU."""
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None
    lines = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    return [shlex.split(ln) for ln in lines if ln]


def test_the_table_names_every_example_file() -> None:
    named = re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)?", README, re.M)
    patterns = [p for pair in named for p in pair if p]
    missing = [f for f in example_files() if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not missing, f"examples/README.md does not list {missing}"
    assert "layernorm_gelu.py" in patterns  # the Quick start's file


def test_the_no_gpu_block_asks_for_no_gpu() -> None:
    commands = no_gpu_commands()
    assert {c[1] for c in commands} == {"check", "generate"}
    assert any(c[1:] == ["generate", "examples/layernorm_gelu.py"] for c in commands)
    assert not [c for c in commands if "full" in c or "verify" in c[1:2]]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_the_no_gpu_commands_work_without_a_gpu(tmp_path: Path) -> None:
    """Each command as written, run from a copy of the repository's examples folder."""
    pytest.importorskip("torch")
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("STITCH_DEBUG", None)
    for argv in no_gpu_commands():
        assert argv[0] == "stitch-lsp"
        proc = subprocess.run(
            [sys.executable, "-m", "stitch_lsp", *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        if argv[1] == "generate":
            wrote = f"examples/{Path(argv[2]).stem}_stitch.py"
            assert (tmp_path / wrote).is_file() and "Verifying by compile only" in proc.stderr
