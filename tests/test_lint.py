"""The code base stays ruff-clean and type-clean: what a contributor checks before committing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    out = subprocess.run(
        [ruff, "check", "stitch_lsp", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:]


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    """mypy over stitch_lsp with the configuration in pyproject.toml (pydantic plugin)."""
    mypy = shutil.which("mypy") or str(Path(sys.executable).with_name("mypy"))
    if not Path(mypy).exists():
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    out = subprocess.run(
        [mypy, "--no-error-summary"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
