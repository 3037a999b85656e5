"""A feature module for the server's end-to-end tests, loaded via STITCH_EXTRA_FEATURES.

It exercises the plug-in registry the way the profile/generate/verify features do: a command
that runs code and one that does not, lenses and actions that point at them, a diagnostic
source of its own, a hover provider that raises (the server must log it once and keep the
other sections), and background jobs through the scheduler with work-done progress.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from lsprotocol import types as lsp

from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.server.app import StitchServer
from stitch_lsp.server.documents import OpenDocument
from stitch_lsp.server.jobs import JobContext, JobSpec
from tests.server.script_worker import script_call


def register(server: StitchServer) -> None:
    server.register_command("test.run", run_command, executes_code=True)
    server.register_command("test.info", info_command, executes_code=False)
    server.register_command("test.job", job_command, executes_code=True)
    server.register_code_lens_provider("fake", lenses)
    server.register_code_action_provider("fake", actions)
    server.register_hover_provider("broken", broken_hover)
    server.register_hover_provider("fake", fake_hover)
    server.register_diagnostic_source("fake", fake_diagnostics)


async def run_command(ls: StitchServer, *args: Any) -> dict[str, Any]:
    # Careless output, as third-party code might produce: must not reach the LSP stream.
    print("Content-Length: 5\r\n\r\nnoise")
    subprocess.run(["echo", "a child process writing to stdout"], check=False)
    return {"ran": list(args)}


async def info_command(ls: StitchServer, *args: Any) -> dict[str, Any]:
    return {"documents": len(ls.documents)}


async def job_command(
    ls: StitchServer, uri: str, seconds: float, needs_gpu: bool, *rest: str
) -> dict[str, Any]:
    """Run a worker process for `seconds` through the scheduler; return the outcome.

    With a 5th argument (a path), the worker starts a grandchild (as nvcc or ncu would) and
    writes the grandchild's pid there (orphan test)."""
    state = ls.documents.get(uri)
    script = "import os, subprocess, sys, time\n"
    if rest:
        script += (
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({seconds})'])\n"
            f"open({rest[0]!r}, 'w').write(str(p.pid))\n"
        )
    script += f"time.sleep({seconds})\n"

    async def run(ctx: JobContext) -> int | None:
        ctx.report("sleeping", 10)
        await ctx.run_worker(script_call(script, timeout_s=600))
        ctx.report("done", 100)
        return 0

    job = ls.jobs.submit(
        JobSpec(
            kind="fake",
            uri=uri,
            version=state.version if state else None,
            run=run,
            needs_gpu=needs_gpu,
            title="Fake job",
            summarize=lambda rc: (f"fake job exited {rc}", 2.5),
        )
    )
    outcome = await job.wait()
    return {"state": outcome.state.value, "message": outcome.message, "job": job.id}


def lenses(doc: OpenDocument) -> list[lsp.CodeLens]:
    top = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
    return [
        lsp.CodeLens(range=top, command=lsp.Command(title="Run", command="test.run")),
        lsp.CodeLens(range=top, command=lsp.Command(title="Info", command="test.info")),
    ]


def actions(doc: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    return [
        lsp.CodeAction(title="Run it", command=lsp.Command(title="Run", command="test.run")),
        lsp.CodeAction(title="Show info", command=lsp.Command(title="Info", command="test.info")),
    ]


def broken_hover(doc: OpenDocument, position: lsp.Position) -> str | None:
    raise RuntimeError("this hover provider is broken on purpose")


async def fake_hover(doc: OpenDocument, position: lsp.Position) -> str | None:
    await asyncio.sleep(0)
    return "**fake section**"


def fake_diagnostics(doc: OpenDocument) -> list[Finding]:
    if "FAKE" not in doc.text:
        return []
    line = doc.text[: doc.text.index("FAKE")].count("\n") + 1
    return [
        Finding(
            path=str(doc.path),
            line=line,
            severity=Severity.warning,
            code="fake.marker",
            message="a FAKE marker",
            source="fake",
            url="https://example.org/fake",
        )
    ]
