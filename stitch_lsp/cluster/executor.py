"""`RayLauncher`: the remote executor of worker calls, for a Ray cluster.

It implements the same interface as the local launcher (`run(call, cancel)` -> reply, or one
`WorkerError`), so the Verifier, the profiler, the Planner and the builtin coder run on a cluster
without knowing it. Per call:

- the files the request names travel content-addressed (`transfer`, `blobs`): each content is
  put into Ray's object store once per session and fetched only by nodes that lack it;
- a `JobRunner` actor asks for one GPU (`num_gpus=1`, or a custom resource) when the job needs
  one (verify, profile, planner profiling) and for one CPU otherwise (builtin generation,
  compile-only checks, reading a report); Ray sets its CUDA_VISIBLE_DEVICES and the worker
  inherits it;
- waiting for a free GPU does not count against the job's timeout; the job itself has the
  call's timeout (enforced on the node) plus a margin for the transfer;
- cancel: the actor's `cancel` stops the worker's process group; if the actor does not answer
  within a grace period it is killed, and its watchdog ends the group;
- a node (or the actor's process) that dies mid-job: the job is run once more, on another node
  when one has the resource, then reported as a `WorkerError`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from stitch_lsp.cluster.node import JobRunner, NodeJob, NodeReply
from stitch_lsp.cluster.session import require_ray
from stitch_lsp.cluster.transfer import (
    ReturnedFileError,
    outbound,
    place_returned,
    replace_paths,
)
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import (
    ResT,
    WorkerCall,
    WorkerError,
    WorkerErrorKind,
    WorkerReply,
)

POLL_S = 0.1
CANCEL_GRACE_S = 10.0
"""The node launcher needs up to 7 s (SIGTERM, grace, SIGKILL) to end a group."""
TRANSFER_MARGIN_S = 120.0
KEEP_CONTENTS = 512


def needs_gpu(call: WorkerCall[Any]) -> bool:
    """Whether the call must hold a GPU: verification (unless compile-only), ncu profiling and
    the Planner's profiling of the reference do; generation and report reading do not."""
    data = call.request.model_dump(mode="json")
    module = call.module
    if module == WORKER_ENTRY_POINTS["builtin"]:
        return False
    if module == WORKER_ENTRY_POINTS["verify"]:
        return not data.get("compile_only", False)
    if module == WORKER_ENTRY_POINTS["planner"]:
        return bool(data.get("profile", False))
    if module == WORKER_ENTRY_POINTS["profile"]:
        return data.get("kind", "profile") == "profile"
    return True


class _NodeLost(Exception):
    def __init__(self, where: str, node_id: str | None, detail: str) -> None:
        super().__init__(detail)
        self.where = where
        self.node_id = node_id


class RayLauncher:
    """Runs worker calls as Ray actors on the cluster this process is connected to."""

    remote = True

    def __init__(
        self,
        *,
        gpu_resource: str = "GPU",
        retries: int = 1,
        cancel_grace_s: float = CANCEL_GRACE_S,
        transfer_margin_s: float = TRANSFER_MARGIN_S,
    ) -> None:
        self.gpu_resource = gpu_resource
        self.retries = retries
        self.cancel_grace_s = cancel_grace_s
        self.transfer_margin_s = transfer_margin_s
        self._refs: OrderedDict[str, Any] = OrderedDict()
        self._live: set[Any] = set()
        self._lock = threading.Lock()
        self._actor_class: Any = None

    # ---- the launcher interface -------------------------------------------------------------

    def run(
        self, call: WorkerCall[ResT], cancel: threading.Event | None = None
    ) -> WorkerReply[ResT]:
        started = time.perf_counter()
        gpu = needs_gpu(call)
        out = outbound(call.request.model_dump(mode="json"))
        job = NodeJob(
            module=call.module,
            request_type=type(call.request),
            request=out.request,
            result_type=call.result,
            timeout_s=call.timeout_s,
            label=call.label,
            env={k: v for k, v in call.env.items() if not (gpu and k == "CUDA_VISIBLE_DEVICES")},
            cwd=str(call.cwd) if call.cwd else None,
            files=out.files,
            refs={sha: [self._put(sha, data)] for sha, data in out.data.items()},
            dirs=out.dirs,
            sandbox=call.sandbox,
            llm_code=call.llm_code,
        )
        lost: list[_NodeLost] = []
        for _ in range(1 + self.retries):
            try:
                reply = self._run_once(call, job, gpu, cancel, {x.node_id for x in lost})
            except _NodeLost as exc:
                lost.append(exc)
                continue
            return self._finish(call, out.dirs, reply, started)
        places = ", ".join(x.where for x in lost)
        raise WorkerError(
            WorkerErrorKind.crashed,
            f"{call.label} was lost with its cluster node or process {len(lost)} times "
            f"({places}): {lost[-1]}",
            seconds=time.perf_counter() - started,
        )

    def kill_all(self) -> None:
        ray = require_ray()
        with self._lock:
            live = list(self._live)
        for actor in live:
            _quiet(ray.kill, actor)

    # ---- one attempt ------------------------------------------------------------------------

    def _run_once(
        self,
        call: WorkerCall[Any],
        job: NodeJob,
        gpu: bool,
        cancel: threading.Event | None,
        avoid: set[str | None],
    ) -> NodeReply:
        ray = require_ray()
        actor = self._actor(gpu, avoid)
        with self._lock:
            self._live.add(actor)
        where, node_id = "a cluster node", None
        try:
            # Placement waits for a free GPU for as long as it takes (cancellable).
            where, node_id = self._wait(
                actor, actor.place.remote(), cancel, None, call, where, graceful=False
            )
            deadline = time.monotonic() + call.timeout_s + self.transfer_margin_s
            return self._wait(actor, actor.run.remote(job), cancel, deadline, call, where)
        except _ActorGone as exc:
            raise _NodeLost(where, node_id, str(exc.__cause__ or exc)) from exc
        finally:
            _quiet(ray.kill, actor)
            with self._lock:
                self._live.discard(actor)

    def _wait(
        self,
        actor: Any,
        ref: Any,
        cancel: threading.Event | None,
        deadline: float | None,
        call: WorkerCall[Any],
        where: str,
        *,
        graceful: bool = True,
    ) -> Any:
        """The value of `ref`; a cancel or the deadline stops the job (`graceful`: the actor
        ends its worker first; else, while nothing runs yet, the actor is simply killed)."""
        ray = require_ray()
        while True:
            ready, _ = ray.wait([ref], timeout=POLL_S)
            if ready:
                try:
                    return ray.get(ref)
                except _actor_errors(ray) as exc:
                    raise _ActorGone() from exc
            if cancel is not None and cancel.is_set():
                if graceful:
                    self._stop(actor, ref)
                else:
                    _quiet(ray.kill, actor)
                raise WorkerError(WorkerErrorKind.cancelled, "cancelled")
            if deadline is not None and time.monotonic() > deadline:
                self._stop(actor, ref)
                raise WorkerError(
                    WorkerErrorKind.timeout,
                    f"{call.label} on {where} timed out after {call.timeout_s:g} s "
                    "(with the file transfer) and was stopped",
                )

    def _stop(self, actor: Any, ref: Any) -> None:
        """Ask the actor to end the worker's group; kill the actor if it does not answer."""
        ray = require_ray()
        _quiet(actor.cancel.remote)
        _quiet(ray.wait, [ref], timeout=self.cancel_grace_s)
        _quiet(ray.kill, actor)

    # ---- pieces -----------------------------------------------------------------------------

    def _put(self, sha: str, data: bytes) -> Any:
        """Each content goes into the object store once; the oldest are let go (Ray frees an
        object once no job holds its reference) so a long editor session stays small."""
        ray = require_ray()
        with self._lock:
            ref = self._refs.get(sha)
            if ref is None:
                ref = self._refs[sha] = ray.put(data)
                while len(self._refs) > KEEP_CONTENTS:
                    self._refs.popitem(last=False)
            self._refs.move_to_end(sha)
            return ref

    def _actor(self, gpu: bool, avoid: set[str | None]) -> Any:
        ray = require_ray()
        if self._actor_class is None:
            self._actor_class = ray.remote(_Runner)
        options: dict[str, Any] = {"max_concurrency": 2, "max_restarts": 0}
        if gpu:
            options["num_cpus"] = 0
            if self.gpu_resource == "GPU":
                options["num_gpus"] = 1
            else:
                options["resources"] = {self.gpu_resource: 1}
        else:
            options["num_cpus"] = 1
        other = self._other_node(avoid, self.gpu_resource if gpu else "CPU") if avoid else None
        if other is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(other, soft=True)
        return self._actor_class.options(**options).remote()

    def _other_node(self, avoid: set[str | None], resource: str) -> str | None:
        ray = require_ray()
        for node in ray.nodes():
            if (
                node.get("Alive")
                and node.get("NodeID") not in avoid
                and node.get("Resources", {}).get(resource, 0) >= 1
            ):
                return str(node["NodeID"])
        return None

    def _finish(
        self, call: WorkerCall[ResT], dirs: list[str], reply: NodeReply, started: float
    ) -> WorkerReply[ResT]:
        try:
            mapping = place_returned(reply.returned, dirs)
        except ReturnedFileError as exc:
            raise WorkerError(
                WorkerErrorKind.no_result,
                f"{call.label}: the node's reply was refused: {exc}",
                seconds=time.perf_counter() - started,
            ) from None
        data = replace_paths(reply.result, mapping) if reply.result is not None else None
        tail = replace_paths(reply.log_tail, mapping)
        seconds = time.perf_counter() - started
        if reply.ok and data is not None:
            return WorkerReply(call.result.model_validate(data), tail, seconds, where=reply.where)
        partial = call.result.model_validate(data) if data is not None else None
        raise WorkerError(
            WorkerErrorKind(reply.error_kind or WorkerErrorKind.no_result.value),
            replace_paths(reply.error_message, mapping) or f"{call.label} wrote no result",
            returncode=reply.returncode,
            log_tail=tail,
            partial=partial,
            seconds=seconds,
        )


class _Runner(JobRunner):
    """The actor: a JobRunner that also says where it was placed."""

    def place(self) -> tuple[str, str]:
        import ray

        return self.where(), ray.get_runtime_context().get_node_id()


class _ActorGone(Exception):
    pass


def _actor_errors(ray: Any) -> tuple[type[BaseException], ...]:
    names = ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError")
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> None:
    """Best-effort cleanup calls: an actor already gone is what we wanted anyway."""
    try:
        fn(*args, **kwargs)
    except Exception:
        return
