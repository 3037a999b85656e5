"""Shared test fixtures: the test data kept in the repository, and the GPU gate."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# KernelBench problems (MIT, licence beside them) and real ncu reports, copied into the repository
# so that a fresh clone needs nothing outside it.
KERNELBENCH = TESTS / "data" / "kernelbench"
NCU_FIXTURES = TESTS / "fixtures" / "ncu"


@cache
def gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None when a CUDA GPU is visible."""
    from stitch_lsp.gpus import inventory

    inv = inventory()
    return None if inv.gpus else (inv.problem or "no CUDA GPU visible")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    return KERNELBENCH


@pytest.fixture(scope="session")
def ncu_fixture_dir() -> Path:
    return NCU_FIXTURES
