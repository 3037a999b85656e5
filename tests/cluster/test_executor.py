"""The remote executor on a local Ray head: results, files, GPUs, cancel, a worker killed."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind
from tests.cluster.conftest import FAKE_GPUS
from tests.cluster.file_worker import file_call
from tests.server.script_worker import script_call

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def launcher(ray_head: object) -> object:
    from stitch_lsp.cluster.executor import RayLauncher

    return RayLauncher(cancel_grace_s=5.0)


def _wait_for(path: Path, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _until_gone(pgid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _gone(pgid):
            return True
        time.sleep(0.1)
    return _gone(pgid)


PIDS = """
import os, pathlib, time
p = pathlib.Path({path!r})
p.write_text(f"{{os.getpid()}} {{os.getpgrp()}} {{os.getppid()}}\\n")
time.sleep({sleep})
answer = "slept"
"""


def test_files_travel_by_content_and_paths_come_back(launcher, tmp_path: Path, node_cache):
    ref = tmp_path / "problem.py"
    ref.write_text("class Model: pass\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    reply = launcher.run(file_call(ref, reports))
    answer = reply.result
    assert answer.text == "class Model: pass\n"
    assert answer.reference == str(ref)  # the node's copy is named back as the user's file
    assert answer.python_seen is None  # this machine's interpreter is not sent
    assert answer.cwd == str(tmp_path)  # the worker ran in the candidate's folder (its copy)
    assert Path(answer.written).parent == reports
    assert Path(answer.written).read_text() == "CLASS MODEL: PASS\n"
    assert reply.where
    blobs = list((node_cache / "blobs").glob("*/problem.py"))
    assert len(blobs) == 1
    stamp = blobs[0].stat().st_mtime_ns
    again = launcher.run(file_call(ref, reports)).result
    assert again.text == answer.text and blobs[0].stat().st_mtime_ns == stamp  # cached
    assert Path(again.written).name == "report_2.txt"  # never over the first one


def test_jobs_run_in_parallel_one_per_gpu(launcher):
    code = (
        "import os, time\nstart = time.time()\ntime.sleep(4)\n"
        "answer = f\"{os.environ.get('CUDA_VISIBLE_DEVICES')} {start} {time.time()}\""
    )
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(launcher.run(script_call(code)).result.text))
        for _ in range(FAKE_GPUS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = [r.split() for r in results]
    assert sorted(gpu for gpu, _, _ in rows) == [str(i) for i in range(FAKE_GPUS)]
    # All of them were sleeping at the same moment.
    assert max(float(s) for _, s, _ in rows) < min(float(e) for _, _, e in rows)


def test_cancel_ends_the_workers_process_group(launcher, tmp_path: Path):
    pids = tmp_path / "pids"
    cancel = threading.Event()
    errors: list[WorkerError] = []

    def run() -> None:
        try:
            launcher.run(script_call(PIDS.format(path=str(pids), sleep=120)), cancel)
        except WorkerError as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    _, pgid, _ = map(int, _wait_for(pids).split())
    assert not _gone(pgid)
    cancel.set()
    t.join(timeout=30)
    assert not t.is_alive()
    assert errors and errors[0].kind is WorkerErrorKind.cancelled
    assert _until_gone(pgid)


RETRY = """
import os, pathlib, time
marker = pathlib.Path({marker!r})
n = len(list(marker.parent.glob(marker.name + '.*')))
ids = f"{{os.getpid()}} {{os.getpgrp()}} {{os.getppid()}}\\n"
pathlib.Path(f"{{marker}}.{{n}}").write_text(ids)
if n >= {kills}:
    answer = f"attempt {{n + 1}}"
else:
    time.sleep(120)
"""


def _kill_actor(marker: Path, n: int) -> int:
    """SIGKILL the Ray worker process that runs attempt `n`; returns the worker's group."""
    _, pgid, actor = map(int, _wait_for(Path(f"{marker}.{n}")).split())
    os.kill(actor, signal.SIGKILL)
    return pgid


def test_a_killed_worker_is_retried_once(launcher, tmp_path: Path):
    marker = tmp_path / "attempt"
    replies = []
    t = threading.Thread(
        target=lambda: replies.append(
            launcher.run(script_call(RETRY.format(marker=str(marker), kills=1)))
        )
    )
    t.start()
    pgid = _kill_actor(marker, 0)
    t.join(timeout=90)
    assert replies and replies[0].result.text == "attempt 2"
    assert _until_gone(pgid)  # the watchdog ended the orphaned worker


def test_a_job_lost_twice_is_reported(launcher, tmp_path: Path):
    marker = tmp_path / "attempt"
    errors: list[WorkerError] = []

    def run() -> None:
        try:
            launcher.run(script_call(RETRY.format(marker=str(marker), kills=2)))
        except WorkerError as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    groups = [_kill_actor(marker, 0), _kill_actor(marker, 1)]
    t.join(timeout=90)
    assert errors and errors[0].kind is WorkerErrorKind.crashed
    assert "2 times" in errors[0].message
    assert all(_until_gone(g) for g in groups)


def test_a_report_read_runs_on_a_cpu_and_names_the_users_file(
    launcher, ncu_fixture_dir: Path, tmp_path: Path
):
    from stitch_lsp.cluster.executor import needs_gpu
    from stitch_lsp.models.profile import ProfileRun, ReportRequest
    from stitch_lsp.workers import WORKER_ENTRY_POINTS
    from stitch_lsp.workers.launch import WorkerCall

    report = tmp_path / "mine.ncu-rep"
    report.write_bytes((ncu_fixture_dir / "relu_bias_full.ncu-rep").read_bytes())
    call = WorkerCall(
        module=WORKER_ENTRY_POINTS["profile"],
        request=ReportRequest(report=str(report)),
        result=ProfileRun,
        timeout_s=120,
        label="the profile worker",
    )
    assert not needs_gpu(call)
    run = launcher.run(call).result
    assert run.ok, run.error
    assert run.report_path == str(report)
    assert run.report is not None and [k.name for k in run.report.kernels] == ["relu_bias"]


def test_a_job_waiting_for_a_gpu_is_cancelled_at_once(launcher, tmp_path: Path):
    """Every GPU busy: the next job waits (without its timeout running) and cancels at once."""
    busy = threading.Event()
    holders = []
    for i in range(FAKE_GPUS):
        code = PIDS.format(path=str(tmp_path / f"holder{i}"), sleep=120)
        holders.append(
            threading.Thread(target=lambda c=code: _swallow(launcher, script_call(c), busy))
        )
    for t in holders:
        t.start()
    for i in range(FAKE_GPUS):
        _wait_for(tmp_path / f"holder{i}")
    waiting = threading.Event()
    errors: list[WorkerError] = []

    def queued() -> None:
        try:
            launcher.run(script_call("answer = 'ran'", timeout_s=1), waiting)
        except WorkerError as exc:
            errors.append(exc)

    t = threading.Thread(target=queued)
    t.start()
    time.sleep(3)  # longer than its timeout: waiting for a GPU does not count
    assert t.is_alive() and not errors
    cancelled_at = time.monotonic()
    waiting.set()
    t.join(timeout=10)
    assert errors and errors[0].kind is WorkerErrorKind.cancelled
    assert time.monotonic() - cancelled_at < 5
    busy.set()
    for h in holders:
        h.join(timeout=30)


def _swallow(launcher, call, cancel: threading.Event) -> None:
    with contextlib.suppress(WorkerError):
        launcher.run(call, cancel)
