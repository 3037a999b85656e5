"""Shared test fixtures: the test data kept in the repository, the GPU gate, and how the suite
runs in parallel.

`pytest` runs the suite in pytest-xdist workers (`-n auto` in pyproject.toml, sized by
`pytest_xdist_auto_num_workers` below: three on a 2-core machine) where no GPU is visible: most
tests wait on processes (servers, workers, nvcc, npm), so one process leaves the cores idle.
Where a GPU is visible, with `-s` or when only named tests run, it stays in one process (GPU
tests share the device and time it). Tests that share something stay on one worker, one after
another (`GROUPS`, read by the scheduler below); tests that measure how late the server's event
loop wakes run alone (`EXCLUSIVE`: the other workers wait between their tests meanwhile, through
a reader-writer file lock). `-n 0` runs everything in one process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
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
    # The suite starts hundreds of Pythons (servers, CLI runs, workers): let them keep the
    # project's compiled modules instead of compiling them again in each (an environment may
    # turn bytecode files off; the sandboxed workers still cannot write them).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if "STITCH_LOOP_REPORT" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="stitch-loop-", suffix=".jsonl")
        os.close(fd)
        os.environ["STITCH_LOOP_REPORT"] = path
        config.stash[_OWN_REPORT] = path
    if getattr(config, "workerinput", None) is None:  # the controller (or the only process)
        os.environ[_LOCKS] = tempfile.mkdtemp(prefix="stitch-pytest-locks-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is None and os.environ.get(_LOCKS):
        shutil.rmtree(os.environ.pop(_LOCKS), ignore_errors=True)


_OWN_REPORT = pytest.StashKey[str]()
_LOCKS = "STITCH_TEST_LOCKS"


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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than there are cores (at most 4) on a machine without a GPU,
    none (one process) otherwise. Most tests wait on the processes they start, so on 2 cores a
    third worker still shortens the run (6.5 minutes instead of 7.8 with two, measured)."""
    if os.environ.get("STITCH_TEST_WORKERS"):
        return int(os.environ["STITCH_TEST_WORKERS"])
    if gpu_reason() is None or config.getoption("capture") == "no":
        return 0
    if config.args and all("::" in a for a in config.args):
        return 0  # a few named tests: starting workers costs more than it saves
    return min(4, (os.cpu_count() or 1) + 1)


# Test files whose tests share something and so run on one worker, one after another: the npm
# build of the extension (a session fixture; the bundle test reads the tests npm compiled), the
# Ray head. A group is one unit of work, and units of more tests are handed out first.
GROUPS = {
    "tests/clients/test_vscode_extension.py": "vscode",
    "tests/clients/test_code_server.py": "vscode",
    "tests/cluster/test_cli.py": "ray",
    "tests/cluster/test_executor.py": "ray",
    "tests/cluster/test_lsp.py": "ray",
}
# Test files that measure the server's event-loop latency: nothing else runs beside them.
EXCLUSIVE = {"tests/hostile/test_loop_cases.py"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` with the groups above. (pytest-xdist 3.8 groups by `xdist_group`
    marks through a suffix on the test's node id, which pytest 9.2 no longer lets it set.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = GROUPS.get(nodeid.split("::")[0])
            return f"group:{group}" if group else str(super()._split_scope(nodeid))

    return Scheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def run_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (the parent of the
    workers' own temporary folders): for build caches that a test on either worker may fill and
    another read. Builds into it are safe from two processes (each builds aside, then renames)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    return KERNELBENCH


@pytest.fixture(scope="session")
def ncu_fixture_dir() -> Path:
    return NCU_FIXTURES


def _lock_dir(config: pytest.Config) -> Path | None:
    """The folder of this run's locks (made by the controller, which hands it to its workers
    in the environment), or None outside pytest-xdist's workers."""
    if getattr(config, "workerinput", None) is None or not os.environ.get(_LOCKS):
        return None
    return Path(os.environ[_LOCKS])


@contextlib.contextmanager
def _turn(config: pytest.Config, exclusive: bool) -> Iterator[None]:
    """A reader-writer lock across the workers: every test holds `run.lock` shared, an exclusive
    test holds it alone. `turn.lock` lets a waiting exclusive test in before new shared ones."""
    folder = _lock_dir(config)
    if folder is None:
        yield
        return
    with open(folder / "turn.lock", "a") as turn, open(folder / "run.lock", "a") as run:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(run, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turn, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _turn(item.config, item.nodeid.split("::")[0] in EXCLUSIVE):
        yield
