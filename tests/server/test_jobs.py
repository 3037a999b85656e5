"""The GPU job scheduler, with fake devices and fake jobs: no GPU, no LSP."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import pytest

from stitch_lsp.server.jobs import (
    Job,
    JobContext,
    JobScheduler,
    JobSpec,
    JobState,
    content_key,
)
from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind
from tests.server.script_worker import script_call


class RecordingProgress:
    """A progress sink that remembers what it saw and lets a test cancel like a client would."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str]] = []
        self.cancellers: dict[int, Callable[[], None]] = {}

    async def begin(self, job: Job, title: str, cancel: Callable[[], object]) -> None:
        self.events.append(("begin", job.id, title))
        self.cancellers[job.id] = cancel

    def report(self, job: Job, message: str, percentage: int | None) -> None:
        self.events.append(("report", job.id, message))

    def end(self, job: Job, message: str) -> None:
        self.events.append(("end", job.id, message))


class Tracker:
    """Fake GPU work that records how many jobs run on each device at once."""

    def __init__(self) -> None:
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.ran: list[str] = []

    def job(self, name: str, seconds: float = 0.05):
        async def run(ctx: JobContext) -> str:
            dev = ctx.device or "cpu"
            self.now[dev] = self.now.get(dev, 0) + 1
            self.peak[dev] = max(self.peak.get(dev, 0), self.now[dev])
            try:
                ctx.report(f"{name} working")
                await asyncio.sleep(seconds)
                self.ran.append(name)
                return f"{name}@{dev}"
            finally:
                self.now[dev] -= 1

        return run


async def test_two_gpus_six_jobs_never_two_at_once_per_gpu() -> None:
    tracker = Tracker()
    progress = RecordingProgress()
    statuses: list[tuple[str, str, float | None]] = []
    sched = JobScheduler(
        ["cuda:0", "cuda:1"], progress=progress, on_status=lambda *a: statuses.append(a)
    )
    jobs = [
        sched.submit(JobSpec(kind="verify", uri=f"file:///p{i}.py", run=tracker.job(f"j{i}")))
        for i in range(6)
    ]
    outcomes = await asyncio.gather(*(j.wait() for j in jobs))
    assert [o.state for o in outcomes] == [JobState.done] * 6
    assert sorted(tracker.ran) == [f"j{i}" for i in range(6)]
    assert tracker.peak == {"cuda:0": 1, "cuda:1": 1}
    # Both GPUs were used, three jobs each.
    assert sorted(o.device for o in outcomes) == ["cuda:0"] * 3 + ["cuda:1"] * 3
    assert [e[0] for e in progress.events].count("begin") == 6
    assert [e[0] for e in progress.events].count("end") == 6
    assert any(s[0] == "running" for s in statuses)
    assert statuses[-1][0] == "done"


async def test_no_gpu_fails_fast_with_a_clear_message() -> None:
    sched = JobScheduler([])
    t0 = time.perf_counter()
    outcome = await sched.submit(JobSpec(kind="profile", run=Tracker().job("x"))).wait()
    assert time.perf_counter() - t0 < 0.5
    assert outcome.state is JobState.no_gpu
    assert "GPU" in outcome.message


async def test_cpu_jobs_run_without_a_gpu() -> None:
    sched = JobScheduler([])
    outcome = await sched.submit(
        JobSpec(kind="check", needs_gpu=False, run=Tracker().job("cpu"))
    ).wait()
    assert outcome.state is JobState.done
    assert outcome.result == "cpu@cpu"


async def test_same_key_supersedes_queued_and_running_jobs() -> None:
    tracker = Tracker()
    sched = JobScheduler(["cuda:0"])
    first = sched.submit(JobSpec(kind="verify", uri="file:///a.py", run=tracker.job("a1", 1.0)))
    await asyncio.sleep(0.05)  # a1 is running now
    second = sched.submit(JobSpec(kind="verify", uri="file:///a.py", run=tracker.job("a2", 1.0)))
    third = sched.submit(JobSpec(kind="verify", uri="file:///a.py", run=tracker.job("a3")))
    o1, o2, o3 = await asyncio.gather(first.wait(), second.wait(), third.wait())
    assert o1.state is JobState.cancelled and "superseded" in o1.message
    assert o2.state is JobState.cancelled and "superseded" in o2.message
    assert o3.state is JobState.done
    assert tracker.ran == ["a3"]


async def test_document_change_cancels_queued_and_running_jobs() -> None:
    versions = {"file:///a.py": 1}
    tracker = Tracker()
    sched = JobScheduler(["cuda:0"], current_version=versions.get)
    blocker = sched.submit(JobSpec(kind="profile", uri="file:///b.py", run=tracker.job("b", 0.2)))
    queued = sched.submit(
        JobSpec(kind="verify", uri="file:///a.py", version=1, run=tracker.job("a"))
    )
    versions["file:///a.py"] = 2  # the user typed while the job waited
    assert (await queued.wait()).state is JobState.cancelled
    assert (await blocker.wait()).state is JobState.done

    running = sched.submit(
        JobSpec(kind="verify", uri="file:///a.py", version=2, run=tracker.job("a", 5.0))
    )
    await asyncio.sleep(0.05)
    assert sched.document_changed("file:///a.py", 3) == 1
    outcome = await running.wait()
    assert outcome.state is JobState.cancelled
    assert "changed" in outcome.message
    assert tracker.ran == ["b"]


async def test_a_cancel_the_task_never_saw_still_ends_as_cancelled() -> None:
    """Python 3.11's wait_for can swallow a CancelledError that lands as its inner future
    completes; the job's workers then stop on the cancel event and raise their own error. The
    job was cancelled all the same, and says why."""
    started = asyncio.Event()

    async def run(ctx: JobContext) -> str:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as that wait_for does
            await asyncio.sleep(5)
        assert ctx.cancelled
        raise WorkerError(WorkerErrorKind.cancelled, "cancelled")

    sched = JobScheduler(["cuda:0"], current_version={"file:///a.py": 2}.get)
    job = sched.submit(JobSpec(kind="verify", uri="file:///a.py", version=2, run=run))
    await asyncio.wait_for(started.wait(), 5)
    assert sched.document_changed("file:///a.py", 3) == 1
    outcome = await asyncio.wait_for(job.wait(), 5)
    assert outcome.state is JobState.cancelled
    assert "changed" in outcome.message


@pytest.mark.slow
async def test_client_cancel_through_progress_kills_the_worker_process_group(tmp_path) -> None:
    progress = RecordingProgress()
    sched = JobScheduler(["cuda:0"], progress=progress)
    pidfile = tmp_path / "child.pid"
    # The worker spawns a grandchild; cancelling must take down the whole group.
    script = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid));"
        "time.sleep(60)"
    )

    async def run(ctx: JobContext):
        return await ctx.run_worker(script_call(script))

    job = sched.submit(JobSpec(kind="profile", uri="file:///k.cu", run=run))
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        await asyncio.sleep(0.05)
    grandchild = int(pidfile.read_text())
    progress.cancellers[job.id]()  # what window/workDoneProgress/cancel does
    outcome = await asyncio.wait_for(job.wait(), 10)
    assert outcome.state is JobState.cancelled
    await asyncio.sleep(0.2)
    assert not _alive(grandchild)
    assert ("end", job.id, "cancelled") in progress.events


async def test_blocking_jobs_hold_the_gpu_until_they_notice_the_cancel() -> None:
    tracker_peak = 0
    running = 0

    def blocking(ctx: JobContext) -> str:
        nonlocal running, tracker_peak
        running += 1
        tracker_peak = max(tracker_peak, running)
        try:
            ctx.cancel_event.wait(0.3)  # a verify() call would poll its cancel event like this
            return "stopped" if ctx.cancel_event.is_set() else "finished"
        finally:
            running -= 1

    async def run(ctx: JobContext) -> str:
        return await ctx.run_blocking(blocking, ctx)

    sched = JobScheduler(["cuda:0"])
    first = sched.submit(JobSpec(kind="verify", uri="file:///a.py", run=run))
    await asyncio.sleep(0.05)
    second = sched.submit(JobSpec(kind="verify", uri="file:///b.py", run=run))
    sched.cancel(first)
    assert (await first.wait()).state is JobState.cancelled
    assert (await second.wait()).result == "finished"
    assert tracker_peak == 1


async def test_cache_hit_when_the_file_returns_to_an_earlier_content() -> None:
    tracker = Tracker()
    sched = JobScheduler(["cuda:0"])
    settings = {"trials": 5}
    text_v1, text_v2 = "x = 1\n", "x = 2\n"

    def spec(text: str, name: str) -> JobSpec:
        return JobSpec(
            kind="verify",
            uri="file:///a.py",
            run=tracker.job(name),
            cache_key=content_key(text, "verify", settings),
            depends_on=frozenset({"/ref.py"}),
            summarize=lambda r: (f"verified {r}", 1.5),
        )

    assert (await sched.submit(spec(text_v1, "v1")).wait()).state is JobState.done
    assert (await sched.submit(spec(text_v2, "v2")).wait()).state is JobState.done
    back = await sched.submit(spec(text_v1, "v1-again")).wait()
    assert back.state is JobState.cached
    assert back.result == "v1@cuda:0"
    assert back.speedup == 1.5
    assert tracker.ran == ["v1", "v2"]
    # Another kind or other settings never share a cache entry.
    assert content_key(text_v1, "profile", settings) != content_key(text_v1, "verify", settings)
    assert content_key(text_v1, "verify", {"trials": 6}) != content_key(text_v1, "verify", settings)
    # The reference changed on disk: results that depended on it are gone.
    assert sched.invalidate_path("/ref.py") == 2
    assert (await sched.submit(spec(text_v1, "v1-fresh")).wait()).state is JobState.done


async def test_failing_job_reports_error_and_server_side_keeps_going() -> None:
    statuses: list[tuple[str, str, float | None]] = []
    sched = JobScheduler(["cuda:0"], on_status=lambda *a: statuses.append(a))

    async def boom(ctx: JobContext) -> None:
        raise RuntimeError("nvcc exploded")

    outcome = await sched.submit(JobSpec(kind="verify", run=boom)).wait()
    assert outcome.state is JobState.failed
    assert "nvcc exploded" in outcome.message
    assert statuses[-1][0] == "error"
    ok = await sched.submit(JobSpec(kind="verify", run=Tracker().job("after"))).wait()
    assert ok.state is JobState.done


@pytest.mark.slow
async def test_worker_timeout_kills_the_group() -> None:
    sched = JobScheduler(["cuda:0"])

    async def run(ctx: JobContext):
        call = script_call("import time; time.sleep(30)", timeout_s=0.3)
        try:
            await ctx.run_worker(call)
        except WorkerError as exc:
            return exc.kind

    outcome = await asyncio.wait_for(sched.submit(JobSpec(kind="x", run=run)).wait(), 10)
    assert outcome.state is JobState.done
    assert outcome.result is WorkerErrorKind.timeout


@pytest.mark.parametrize("devices", [["cuda:0"], ["cuda:0", "cuda:1", "cuda:2"]])
async def test_shutdown_cancels_everything(devices: list[str]) -> None:
    sched = JobScheduler(devices)
    jobs = [
        sched.submit(JobSpec(kind="v", uri=f"file:///{i}", run=Tracker().job(str(i), 5.0)))
        for i in range(5)
    ]
    await asyncio.sleep(0.05)
    await asyncio.wait_for(sched.shutdown(), 10)
    assert all(j.future.result().state is JobState.cancelled for j in jobs)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); check its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def test_untrusted_workspace_runs_no_user_code() -> None:
    trusted = False
    statuses: list[tuple[str, str, float | None]] = []
    sched = JobScheduler(
        ["cuda:0"], may_execute=lambda: trusted, on_status=lambda *a: statuses.append(a)
    )
    tracker = Tracker()
    gpu = await sched.submit(JobSpec(kind="profile", run=tracker.job("gpu"))).wait()
    assert gpu.state is JobState.untrusted and "not trusted" in gpu.message
    assert statuses[-1][0] == "error"
    marked = await sched.submit(
        JobSpec(kind="build", needs_gpu=False, executes_code=True, run=tracker.job("cpu"))
    ).wait()
    assert marked.state is JobState.untrusted
    # Reading a report runs none of the user's code: allowed.
    read = await sched.submit(JobSpec(kind="read", needs_gpu=False, run=tracker.job("read"))).wait()
    assert read.state is JobState.done
    assert tracker.ran == ["read"]
    trusted = True
    assert (await sched.submit(JobSpec(kind="profile", run=tracker.job("gpu"))).wait()).ok
