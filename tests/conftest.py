"""Shared test fixtures: the test data kept in the repository, and the GPU gate."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# KernelBench problems (MIT, licence beside them) and real ncu reports, copied into the repository
# so that a fresh clone needs nothing outside it.
KERNELBENCH = TESTS / "data" / "kernelbench"
NCU_FIXTURES = TESTS / "fixtures" / "ncu"


def pytest_configure(config: pytest.Config) -> None:
    """Every language server the tests start watches its event loop and reports, at exit, the
    longest it was blocked (`stitch_lsp/server/watchdog.py`); the summary prints the worst."""
    os.environ.setdefault("STITCH_LOOP_WATCHDOG", "1")
    if "STITCH_LOOP_REPORT" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="stitch-loop-", suffix=".jsonl")
        os.close(fd)
        os.environ["STITCH_LOOP_REPORT"] = path
        config.stash[_OWN_REPORT] = path


_OWN_REPORT = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    path = os.environ.get("STITCH_LOOP_REPORT")
    if not path or not Path(path).is_file():
        return
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    if config.stash.get(_OWN_REPORT, None) == path:
        Path(path).unlink(missing_ok=True)
    if not rows:
        return
    worst = max(rows, key=lambda r: r.get("maxLagMs") or 0.0)
    over = sum(r.get("over100ms") or 0 for r in rows)
    start = max(r.get("startupMaxLagMs") or 0.0 for r in rows)
    test = (worst.get("test") or "?").split(" ")[0]
    terminalreporter.write_line(
        f"stitch-lsp event loop: longest block while serving {worst.get('maxLagMs')} ms over "
        f"{len(rows)} server(s), in {test} (during {worst.get('worstDuring')}); "
        f"{over} wake-up(s) later than 100 ms; longest at start-up {start} ms"
    )


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
