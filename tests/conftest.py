"""Shared test fixtures: where the shared data lives, and the GPU gate."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STITCH_SHARED_DIR", REPO.parent / "shared")).resolve()


@cache
def gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None when a CUDA GPU is visible."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver (nvidia-smi not found)"
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "no CUDA GPU visible to nvidia-smi"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def kernelbench_dir(shared_dir: Path) -> Path:
    return shared_dir / "kernelbench-dev"


@pytest.fixture(scope="session")
def ncu_fixture_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures" / "ncu"
