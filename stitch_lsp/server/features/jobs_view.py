"""The editor's jobs view: what runs and waits, pushed as `stitch/jobs`, and a cancel command.

Work-done progress shows one job at a time and only where the client puts it; a GPU developer
also wants to see what is queued behind it, on which GPU, and to stop any of them. The server
sends the whole list (it is short) whenever a job is queued, starts, reports or ends; the client
can also ask for it with the `stitch/jobs` request (after a restart of its view).

Command `stitch.cancel`: [] cancels every job, [{id}] or [id] one job, [{uri}] the jobs of one
file. It runs nothing, so it is offered in untrusted workspaces too. A cancelled job's worker
process group is killed and the job writes nothing.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from stitch_lsp.analysis.document import uri_to_path
from stitch_lsp.models.editor import CANCEL_COMMAND, JOBS_METHOD, JobsParams, JobView
from stitch_lsp.server.jobs import Job, JobState

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer

CANCEL_REASON = "cancelled from the editor"


def job_view(job: Job, now: float | None = None) -> JobView:
    now = time.time() if now is None else now
    spec = job.spec
    path = uri_to_path(spec.uri) if spec.uri else None
    since = job.started_at or job.submitted_at
    return JobView(
        id=job.id,
        kind=spec.kind,
        title=job.title,
        uri=spec.uri,
        file=path.name if path is not None else None,
        device=job.device,
        state="running" if job.state is JobState.running else "queued",
        stage=job.stage,
        submitted_at=job.submitted_at,
        started_at=job.started_at,
        elapsed_s=max(0.0, now - since),
    )


def jobs_params(server: StitchServer) -> JobsParams:
    now = time.time()
    jobs = sorted(server.jobs.active_jobs(), key=lambda j: j.id)
    return JobsParams(jobs=[job_view(j, now) for j in jobs])


def cancel_jobs(server: StitchServer, args: tuple[Any, ...]) -> list[int]:
    """Cancel what `args` names; the ids of the jobs that were cancelled."""
    active = server.jobs.active_jobs()
    if not args or args[0] is None:
        chosen = active
    else:
        arg = args[0]
        if isinstance(arg, int) and not isinstance(arg, bool):
            chosen = [j for j in active if j.id == arg]
        elif isinstance(arg, dict) and isinstance(arg.get("id"), int):
            chosen = [j for j in active if j.id == arg["id"]]
        elif isinstance(arg, dict) and isinstance(arg.get("uri"), str):
            chosen = [j for j in active if j.spec.uri == arg["uri"]]
        else:
            raise ValueError(f"{CANCEL_COMMAND} wants [], [{{id}}] or [{{uri}}]")
    return [j.id for j in chosen if server.jobs.cancel(j, CANCEL_REASON)]


def register(server: StitchServer) -> None:
    pending: list[asyncio.Handle] = []

    def push() -> None:
        pending.clear()
        if not server.initialized:
            return
        server.protocol.notify(JOBS_METHOD, jobs_params(server).to_wire())

    def on_change() -> None:
        # Several changes in one turn of the event loop (a report right after a start) go out
        # as one notification.
        if pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        pending.append(loop.call_soon(push))

    server.jobs.on_change = on_change

    @server.feature(JOBS_METHOD)
    def jobs_request(ls: StitchServer, params: Any) -> dict[str, Any]:
        return jobs_params(ls).to_wire()

    async def cancel(ls: StitchServer, *args: Any) -> dict[str, Any]:
        ids = cancel_jobs(ls, args)
        return {"cancelled": ids}

    server.register_command(CANCEL_COMMAND, cancel, executes_code=False)
