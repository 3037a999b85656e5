"""The node side of a cluster job: an actor that runs one worker call and owns its process group.

Ray's own cancel of a running task kills the Ray worker process, not a worker that lives in its
own session. So every job gets a `JobRunner` actor: `run` places the files, runs the worker with
the same local launcher as on a single machine (own process group, timeout, cancel event), and
sends back the result with its paths rewritten; `cancel` (served on a second thread) sets the
launcher's cancel event, which stops the whole group. If the actor itself is killed, the watchdog
it started ends the groups it had. Imported only inside Ray workers.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stitch_lsp.cluster.blobs import Blob, BlobCache, cache_root
from stitch_lsp.cluster.transfer import Returned, collect_returned, map_strings, replace_paths

WATCHDOG_MODULE = "stitch_lsp.cluster.watchdog"
WATCHDOG_START_S = 30.0


@dataclass
class NodeJob:
    """One worker call as it travels to the node (paths still this machine's)."""

    module: str
    request_type: type[BaseModel]
    request: dict[str, Any]
    result_type: type[BaseModel]
    timeout_s: float
    label: str
    env: dict[str, str]
    cwd: str | None
    files: dict[str, Blob]
    refs: dict[str, list[Any]]
    """sha256 -> [ObjectRef of the bytes]: in a list, so Ray hands the reference, not the bytes,
    and a node that already holds the content never fetches it."""
    dirs: list[str] = field(default_factory=list)
    sandbox: str | None = None
    """The caller's `stitch.sandbox`; the node applies it (and refuses LLM code without bwrap)."""
    llm_code: bool = False


@dataclass
class NodeReply:
    """What comes back: the result (or the partial one) as JSON with this machine's paths."""

    ok: bool
    where: str
    result: dict[str, Any] | None = None
    log_tail: str = ""
    seconds: float = 0.0
    error_kind: str | None = None
    error_message: str = ""
    returncode: int | None = None
    returned: list[Returned] = field(default_factory=list)
    fetched: int = 0
    """How many files this job had to fetch (the others were in the node's cache)."""


class JobRunner:
    """The actor class (wrapped with `ray.remote` by the executor)."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._watchdog = _start_watchdog(os.getpid())

    def where(self) -> str:
        import ray

        gpus = ",".join(str(g) for g in ray.get_gpu_ids())
        host = ray.util.get_node_ip_address() or socket.gethostname()
        return f"{host}/gpu{gpus}" if gpus else host

    def pid(self) -> int:
        return os.getpid()

    def cancel(self) -> None:
        self._cancel.set()

    def run(self, job: NodeJob) -> NodeReply:
        import ray

        from stitch_lsp.workers.launch import LocalLauncher, WorkerCall, WorkerError

        where = self.where()
        cache = BlobCache()
        missing = {b.sha256: b for b in job.files.values() if not cache.has(b)}
        for blob in missing.values():
            cache.put(blob, ray.get(job.refs[blob.sha256][0]))
        jobs_root = cache_root() / "jobs"
        jobs_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="job-", dir=jobs_root))
        try:
            to_node = {local: str(cache.path(blob)) for local, blob in job.files.items()}
            dir_roots = []
            for i, local in enumerate(job.dirs):
                folder = scratch / f"out{i}"
                folder.mkdir()
                dir_roots.append(folder)
                to_node[local] = str(folder)
            request = map_strings(job.request, lambda s: to_node.get(s, s))
            cwd = scratch
            for local, node_path in to_node.items():
                if job.cwd and local in job.files and str(Path(local).parent) == job.cwd:
                    cwd = Path(node_path).parent
                    break
            env = {**job.env, "TMPDIR": str(scratch)}
            call = WorkerCall(
                module=job.module,
                request=job.request_type.model_validate(request),
                result=job.result_type,
                timeout_s=job.timeout_s,
                env=env,
                cwd=cwd,
                label=job.label,
                sandbox=job.sandbox,
                llm_code=job.llm_code,
            )
            back = _reverse(to_node, job)
            try:
                reply = LocalLauncher().run(call, self._cancel)
            except WorkerError as exc:
                partial = exc.partial.model_dump(mode="json") if exc.partial else None
                returned = collect_returned(partial, scratch, dir_roots) if partial else []
                return NodeReply(
                    ok=False,
                    where=where,
                    result=replace_paths(partial, back) if partial else None,
                    log_tail=replace_paths(exc.log_tail, back),
                    seconds=exc.seconds,
                    error_kind=exc.kind.value,
                    error_message=replace_paths(exc.message, back),
                    returncode=exc.returncode,
                    returned=returned,
                    fetched=len(missing),
                )
            result = reply.result.model_dump(mode="json")
            returned = collect_returned(result, scratch, dir_roots)
            return NodeReply(
                ok=True,
                where=where,
                result=replace_paths(result, back),
                log_tail=replace_paths(reply.log_tail, back),
                seconds=reply.seconds,
                returned=returned,
                fetched=len(missing),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _reverse(to_node: dict[str, str], job: NodeJob) -> dict[str, str]:
    """Node path -> this machine's path, for files and for the folders that hold them (so a
    message naming the candidate's folder names the user's folder). Scratch folders are not
    reversed here: their files come back and are mapped where they are written."""
    back: dict[str, str] = {}
    for local, node_path in to_node.items():
        if local in job.files:
            back[node_path] = local
            back.setdefault(str(Path(node_path).parent), str(Path(local).parent))
    return back


def _start_watchdog(actor_pid: int) -> subprocess.Popen[bytes] | None:
    """Start the watchdog and wait until it watches: a job started before that, with the actor
    killed at once, would leave its worker behind."""
    from stitch_lsp.workers.launch import worker_command, worker_environment

    try:
        proc = subprocess.Popen(
            worker_command(None, WATCHDOG_MODULE, [str(actor_pid)]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=worker_environment(),
            cwd=tempfile.gettempdir(),
            start_new_session=True,
        )
    except OSError:
        return None
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], WATCHDOG_START_S)
    if ready:
        proc.stdout.readline()
    proc.stdout.close()  # the watchdog prints nothing more
    return proc
