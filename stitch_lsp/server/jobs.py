"""Background job scheduler for GPU work (verify, profile, generate) started from the editor.

Why it exists: a GPU can only time or profile one thing at a time without the numbers lying, a
user who keeps typing should not pile up stale runs, and a slow job must never block the server.
So: one queue per GPU with at most one running job each; a new job with the same key
(e.g. `(uri, "verify")`) supersedes the old one; a job whose document changed since it was
queued is cancelled; progress goes through a pluggable sink (LSP work-done progress in the
server, cancellable from the editor); results are cached by a content hash and reused when the
file returns to an earlier content. Workers go through the one launcher
(`stitch_lsp.workers.launch`): their own process group, so a cancel kills the whole tree (nvcc,
ncu, the Python worker and its children). In an
untrusted workspace, jobs that run the user's code (every GPU job, and CPU jobs marked
`executes_code=True`) are refused with a clear message, whatever feature asked for them.

Usage from a feature module:

    spec = JobSpec(kind="verify", uri=uri, version=v, run=my_coroutine,
                   cache_key=content_key(text, "verify", {"trials": s.trials}))
    outcome = await server.jobs.run(spec)  # submit + wait; cancelling the wait cancels the job

`run` receives a `JobContext`: `ctx.device`, `ctx.report(...)`, `ctx.cancel_event`
(a threading.Event for blocking code), `await ctx.run_worker(call)` and
`await ctx.run_blocking(fn, ...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from stitch_lsp.workers.devices import no_gpu_message
from stitch_lsp.workers.launch import (
    ResT,
    WorkerCall,
    WorkerLauncher,
    WorkerReply,
    default_launcher,
)

log = logging.getLogger(__name__)

JobKey = tuple[str | None, str]


class JobState(str, Enum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"
    cached = "cached"
    no_gpu = "no_gpu"
    untrusted = "untrusted"


@dataclass
class JobOutcome:
    """What `Job.wait()` returns. `result` is whatever the job's coroutine returned."""

    state: JobState
    result: Any = None
    message: str = ""
    speedup: float | None = None
    device: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.state in (JobState.done, JobState.cached)


@dataclass
class JobSpec:
    """A unit of background work. `key` (uri, kind) decides which older job it supersedes."""

    kind: str
    run: Callable[[JobContext], Awaitable[Any]]
    uri: str | None = None
    version: int | None = None
    needs_gpu: bool = True
    cache_key: str | None = None
    depends_on: frozenset[str] = frozenset()
    title: str | None = None
    cancel_on_change: bool = True
    summarize: Callable[[Any], tuple[str, float | None]] | None = None
    executes_code: bool | None = None
    """Builds or runs the user's code. None: the same as `needs_gpu` (GPU jobs always do)."""

    @property
    def key(self) -> JobKey:
        return (self.uri, self.kind)

    @property
    def runs_user_code(self) -> bool:
        return self.needs_gpu if self.executes_code is None else self.executes_code


class ProgressSink(Protocol):
    """Where progress goes. The server's sink speaks LSP `$/progress`; tests use a list."""

    async def begin(self, job: Job, title: str, cancel: Callable[[], object]) -> None: ...

    def report(self, job: Job, message: str, percentage: int | None) -> None: ...

    def end(self, job: Job, message: str) -> None: ...


StatusCallback = Callable[[str, str, float | None], None]


def content_key(text: str | bytes, kind: str, settings: Mapping[str, Any] | None = None) -> str:
    """sha256 over the content, the job kind and only the settings that change the result."""
    h = hashlib.sha256()
    h.update(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    h.update(b"\0" + kind.encode())
    h.update(b"\0" + json.dumps(settings or {}, sort_keys=True, default=str).encode())
    return h.hexdigest()


class JobContext:
    """Handed to a running job: where it runs, how to report, and how to spawn killable work."""

    def __init__(self, job: Job, scheduler: JobScheduler) -> None:
        self.job = job
        self.device = job.device
        self._scheduler = scheduler

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the job is cancelled; blocking code (in threads) polls it."""
        return self.job.cancel_event

    @property
    def cancelled(self) -> bool:
        return self.job.cancel_event.is_set()

    def report(self, message: str, percentage: int | None = None) -> None:
        self._scheduler._report(self.job, message, percentage)

    async def run_worker(self, call: WorkerCall[ResT]) -> WorkerReply[ResT]:
        """Run a worker through the scheduler's launcher. Cancelling the job stops it (its whole
        process group); failures raise `WorkerError`."""
        return await self.run_blocking(self._scheduler.launcher.run, call, self.cancel_event)

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking code in the executor; the device stays reserved until it returns."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._scheduler.executor, fn, *args)
        self.job.threads.add(fut)
        try:
            return await asyncio.shield(fut)
        finally:
            if fut.done():
                self.job.threads.discard(fut)


_ids = itertools.count(1)


@dataclass(eq=False)
class Job:
    spec: JobSpec
    id: int = field(default_factory=lambda: next(_ids))
    state: JobState = JobState.queued
    device: str | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = ""
    threads: set[asyncio.Future[Any]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    future: asyncio.Future[JobOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    started: float | None = None
    stage: str = ""
    """The last progress message: what the job is doing now (the editor's jobs view shows it)."""
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    """Wall-clock (epoch) times, for elapsed times shown in another process."""

    @property
    def title(self) -> str:
        return self.spec.title or f"stitch: {self.spec.kind}"

    @property
    def finished(self) -> bool:
        return self.future.done()

    async def wait(self) -> JobOutcome:
        return await asyncio.shield(self.future)


class JobScheduler:
    """One FIFO queue and one runner per GPU; CPU-only jobs run beside them, bounded."""

    def __init__(
        self,
        devices: Iterable[str],
        *,
        progress: ProgressSink | None = None,
        on_status: StatusCallback | None = None,
        current_version: Callable[[str], int | None] | None = None,
        may_execute: Callable[[], bool] | None = None,
        executor: Executor | None = None,
        cache_size: int = 256,
        cpu_slots: int = 2,
        thread_grace_s: float = 30.0,
        launcher: WorkerLauncher | None = None,
    ) -> None:
        self.devices: list[str] = list(devices)
        self.progress = progress
        self.on_status = on_status
        self.current_version = current_version
        self.may_execute = may_execute
        self.executor = executor
        self.thread_grace_s = thread_grace_s
        self.launcher: WorkerLauncher = launcher or default_launcher()
        self._queues: dict[str, deque[Job]] = {d: deque() for d in self.devices}
        self._running: dict[str, Job | None] = {d: None for d in self.devices}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._cpu_slots = cpu_slots
        self._cpu_sem: asyncio.Semaphore | None = None
        self._active: dict[JobKey, Job] = {}
        self._cache: OrderedDict[str, tuple[JobOutcome, frozenset[str]]] = OrderedDict()
        self._cache_size = cache_size
        self.on_change: Callable[[], None] | None = None
        """Called whenever a job is queued, starts, reports or ends (the jobs view listens)."""
        # Why no GPU job can run although GPUs may exist (torch missing for the workers).
        self.unavailable: str | None = None

    # ---- public API -------------------------------------------------------------------------

    def set_devices(self, devices: Iterable[str]) -> None:
        """Replace the device list (settings changed). Queued jobs on removed devices move over."""
        new = list(devices)
        orphans: list[Job] = []
        for d in list(self._queues):
            if d not in new:
                orphans.extend(self._queues.pop(d))
                self._running.pop(d, None)
        for d in new:
            self._queues.setdefault(d, deque())
            self._running.setdefault(d, None)
        self.devices = new
        for job in orphans:
            if self.devices:
                self._enqueue(job)
            else:
                self._finish(
                    job, JobOutcome(JobState.no_gpu, message=self.unavailable or no_gpu_message())
                )

    def submit(self, spec: JobSpec) -> Job:
        """Queue a job. Returns at once; `await job.wait()` for the outcome."""
        job = Job(spec)
        old = self._active.get(spec.key)
        if old is not None and not old.finished:
            self.cancel(old, "superseded by a newer request")
        if spec.cache_key is not None and spec.cache_key in self._cache:
            hit, _ = self._cache[spec.cache_key]
            self._cache.move_to_end(spec.cache_key)
            outcome = JobOutcome(
                JobState.cached, hit.result, hit.message, hit.speedup, hit.device, 0.0
            )
            self._finish(job, outcome)
            return job
        if spec.runs_user_code and self.may_execute is not None and not self.may_execute():
            message = "The workspace is not trusted: stitch-lsp builds and runs no code here."
            self._finish(job, JobOutcome(JobState.untrusted, message=message))
            return job
        if spec.needs_gpu and not self.devices:
            message = self.unavailable or no_gpu_message()
            self._finish(job, JobOutcome(JobState.no_gpu, message=message))
            return job
        self._active[spec.key] = job
        if spec.needs_gpu:
            self._enqueue(job)
        else:
            job.task = asyncio.get_running_loop().create_task(self._run_cpu(job))
        self._changed()
        return job

    async def run(self, spec: JobSpec) -> JobOutcome:
        """Submit and wait. When the waiter is cancelled (the editor cancelled its request), the
        job is cancelled too: its workers are stopped and it writes nothing."""
        job = self.submit(spec)
        try:
            return await job.wait()
        except asyncio.CancelledError:
            self.cancel(job, "cancelled by the editor")
            raise

    def cancel(self, job: Job | JobKey, reason: str = "cancelled") -> bool:
        """Cancel a queued or running job (or the active job with that key)."""
        if not isinstance(job, Job):
            found = self._active.get(job)
            if found is None:
                return False
            job = found
        if job.finished:
            return False
        job.cancel_reason = reason
        job.cancel_event.set()
        if job.task is not None and not job.task.done():
            # The task finishes the job itself, after its workers are gone.
            job.task.cancel(reason)
        else:
            for q in self._queues.values():
                with contextlib.suppress(ValueError):
                    q.remove(job)
            self._finish(job, JobOutcome(JobState.cancelled, message=reason))
        return True

    def document_changed(self, uri: str, version: int | None) -> int:
        """The document moved on: cancel jobs that were queued for an older version of it."""
        n = 0
        for job in list(self._active.values()):
            s = job.spec
            if (
                s.uri == uri
                and s.cancel_on_change
                and s.version is not None
                and s.version != version
                and self.cancel(job, "the document changed since the job was queued")
            ):
                n += 1
        return n

    def invalidate_path(self, path: str) -> int:
        """Drop cached results that depend on a file that changed on disk."""
        stale = [k for k, (_, deps) in self._cache.items() if path in deps]
        for k in stale:
            del self._cache[k]
        return len(stale)

    def cached(self, key: str) -> JobOutcome | None:
        hit = self._cache.get(key)
        return hit[0] if hit else None

    def active_jobs(self) -> list[Job]:
        return [j for j in self._active.values() if not j.finished]

    async def shutdown(self) -> None:
        """Cancel everything and wait for workers to be gone (server exit)."""
        for job in list(self._active.values()):
            self.cancel(job, "the server is shutting down")
        tasks = [t for t in self._runners.values() if not t.done()]
        tasks += [j.task for j in self._active.values() if j.task and not j.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=self.thread_grace_s)

    def kill_all_processes(self) -> None:
        """Last resort when the event loop is gone (the editor vanished without `shutdown`):
        no worker may outlive the server."""
        for job in list(self._active.values()):
            job.cancel_event.set()
        self.launcher.kill_all()

    # ---- internals --------------------------------------------------------------------------

    def _enqueue(self, job: Job) -> None:
        def load(d: str) -> int:
            return len(self._queues[d]) + (1 if self._running.get(d) is not None else 0)

        device = min(self.devices, key=load)
        job.device = device
        self._queues[device].append(job)
        runner = self._runners.get(device)
        if runner is None or runner.done():
            loop = asyncio.get_running_loop()
            self._runners[device] = loop.create_task(self._run_device(device))

    async def _run_device(self, device: str) -> None:
        queue = self._queues.get(device)
        while queue:
            job = queue.popleft()
            if job.finished:
                continue
            if self._document_moved_on(job):
                self._finish(
                    job,
                    JobOutcome(
                        JobState.cancelled,
                        message="the document changed since the job was queued",
                    ),
                )
                continue
            self._running[device] = job
            try:
                job.task = asyncio.get_running_loop().create_task(self._execute(job))
                await asyncio.wait({job.task})
            finally:
                self._running[device] = None
                self._finish_if_dropped(job)
            queue = self._queues.get(device)

    async def _run_cpu(self, job: Job) -> None:
        if self._cpu_sem is None:
            self._cpu_sem = asyncio.Semaphore(self._cpu_slots)
        try:
            async with self._cpu_sem:
                if self._document_moved_on(job):
                    self._finish(
                        job,
                        JobOutcome(
                            JobState.cancelled,
                            message="the document changed since the job was queued",
                        ),
                    )
                    return
                await self._execute(job)
        finally:
            self._finish_if_dropped(job)

    def _finish_if_dropped(self, job: Job) -> None:
        """A task cancelled before its first step never runs `_execute`; settle its job here."""
        if not job.finished:
            self._finish(
                job, JobOutcome(JobState.cancelled, message=job.cancel_reason or "cancelled")
            )

    def _document_moved_on(self, job: Job) -> bool:
        s = job.spec
        if self.current_version is None or s.uri is None or s.version is None:
            return False
        if not s.cancel_on_change:
            return False
        current = self.current_version(s.uri)
        return current is not None and current != s.version

    async def _execute(self, job: Job) -> None:
        if job.finished:
            return
        job.state = JobState.running
        job.started = time.perf_counter()
        job.started_at = time.time()
        self._changed()
        where = f" on {job.device}" if job.device else ""
        self._status("running", f"{job.title}{where}", None)
        if self.progress is not None:
            try:
                await self.progress.begin(job, job.title, lambda: self.cancel(job, "cancelled"))
            except Exception:
                log.exception("progress begin failed for job %s", job.id)
        outcome: JobOutcome
        try:
            result = await job.spec.run(JobContext(job, self))
            message, speedup = (
                job.spec.summarize(result) if job.spec.summarize else (f"{job.title}: done", None)
            )
            outcome = JobOutcome(JobState.done, result, message, speedup, job.device)
        except asyncio.CancelledError:
            job.cancel_event.set()
            outcome = JobOutcome(
                JobState.cancelled, message=job.cancel_reason or "cancelled", device=job.device
            )
        except Exception as exc:
            if job.cancel_event.is_set():
                # Cancelled, though the task saw no CancelledError: Python 3.11's wait_for
                # can swallow one that lands as its inner future completes (progress.begin),
                # and the job's workers then stop on the event and raise their own error.
                outcome = JobOutcome(
                    JobState.cancelled, message=job.cancel_reason or "cancelled", device=job.device
                )
            else:
                log.exception("job %s (%s) failed", job.id, job.spec.kind)
                outcome = JobOutcome(
                    JobState.failed, message=f"{job.title} failed: {exc}", device=job.device
                )
        await self._release(job)
        outcome.seconds = time.perf_counter() - (job.started or time.perf_counter())
        self._finish(job, outcome)

    async def _release(self, job: Job) -> None:
        """Before the device takes the next job, make sure this one's workers are really gone
        (a worker's thread returns only once its process group has ended)."""
        pending = [t for t in job.threads if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=self.thread_grace_s)
            if still:
                log.warning(
                    "job %s: %d blocking call(s) ignored cancellation for %.0f s",
                    job.id,
                    len(still),
                    self.thread_grace_s,
                )

    def _finish(self, job: Job, outcome: JobOutcome) -> None:
        job.state = outcome.state
        if self._active.get(job.spec.key) is job:
            del self._active[job.spec.key]
        if outcome.state is JobState.done and job.spec.cache_key is not None:
            self._cache[job.spec.cache_key] = (outcome, job.spec.depends_on)
            self._cache.move_to_end(job.spec.cache_key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if job.started is not None and self.progress is not None:
            try:
                self.progress.end(job, outcome.message or outcome.state.value)
            except Exception:
                log.exception("progress end failed for job %s", job.id)
        if not job.future.done():
            job.future.set_result(outcome)
        self._changed()
        if outcome.state in (JobState.done, JobState.cached):
            self._status("done", outcome.message, outcome.speedup)
        elif outcome.state in (JobState.failed, JobState.no_gpu, JobState.untrusted):
            self._status("error", outcome.message, None)
        elif not self.active_jobs():
            self._status("idle", outcome.message, None)

    def _report(self, job: Job, message: str, percentage: int | None) -> None:
        if not job.finished and message != job.stage:
            job.stage = message
            self._changed()
        if self.progress is not None and not job.finished:
            try:
                self.progress.report(job, message, percentage)
            except Exception:
                log.exception("progress report failed for job %s", job.id)

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("jobs change callback failed")

    def _status(self, state: str, message: str, speedup: float | None) -> None:
        if self.on_status is not None:
            try:
                self.on_status(state, message, speedup)
            except Exception:
                log.exception("status callback failed")
