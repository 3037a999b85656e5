"""LSP work-done progress for scheduler jobs, cancellable from the editor.

The server creates the token (`window/workDoneProgress/create`) only when the client says it
supports server-initiated progress; otherwise jobs still run, silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.jobs import Job

log = logging.getLogger(__name__)


class LspProgress:
    """The scheduler's ProgressSink, speaking `$/progress` begin/report/end."""

    def __init__(self, server: StitchServer) -> None:
        self.server = server
        self._tokens: dict[int, str] = {}

    def _supported(self) -> bool:
        caps = self.server.client_capabilities
        return bool(caps and caps.window and caps.window.work_done_progress)

    async def begin(self, job: Job, title: str, cancel: Callable[[], object]) -> None:
        if not self._supported():
            return
        token = f"stitch-job-{job.id}"
        progress = self.server.work_done_progress
        try:
            await asyncio.wait_for(progress.create_async(token), 10)
        except Exception as exc:  # the client may refuse or never answer
            log.info("client did not create progress token %s: %s", token, exc)
            return
        self._tokens[job.id] = token
        progress.begin(
            token,
            lsp.WorkDoneProgressBegin(title=title, cancellable=True, message="starting"),
        )
        fut = progress.tokens.get(token)
        if fut is not None:
            loop = asyncio.get_running_loop()

            def on_done(f: object) -> None:
                if getattr(f, "cancelled", lambda: False)():
                    loop.call_soon_threadsafe(cancel)

            fut.add_done_callback(on_done)

    def report(self, job: Job, message: str, percentage: int | None) -> None:
        token = self._tokens.get(job.id)
        if token is None:
            return
        self.server.work_done_progress.report(
            token, lsp.WorkDoneProgressReport(message=message, percentage=percentage)
        )

    def end(self, job: Job, message: str) -> None:
        token = self._tokens.pop(job.id, None)
        if token is None:
            return
        progress = self.server.work_done_progress
        progress.end(token, lsp.WorkDoneProgressEnd(message=message))
        progress.tokens.pop(token, None)
