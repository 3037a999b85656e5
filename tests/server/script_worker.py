"""A worker for tests of the launcher and the scheduler: runs a snippet of Python, answers.

`python -E -P -c BOOTSTRAP tests.server.script_worker REQUEST RESULT` (the launcher's command),
so the repository must be on the caller's PYTHONPATH.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from stitch_lsp.workers.entry import read_request
from stitch_lsp.workers.launch import WorkerCall

MODULE = "tests.server.script_worker"
REPO = Path(__file__).resolve().parents[2]


class Script(BaseModel):
    code: str
    partial: str | None = None
    """Saved before the code runs, so a crash leaves it behind."""


class Answer(BaseModel):
    text: str


def main(argv: list[str]) -> int:
    request, out = read_request(argv, Script, MODULE)
    if request.partial is not None:
        out.save(Answer(text=request.partial))
    scope: dict[str, object] = {}
    exec(request.code, scope)
    out.save(Answer(text=str(scope.get("answer", ""))))
    sys.stdout.flush()
    return 0


def script_call(code: str, timeout_s: float = 60, **kw: Any) -> WorkerCall[Answer]:
    """A launcher call that runs `code` in this worker (the repository on its import path).

    Unconfined by default: these scripts report host pids and write marker files, to test
    the launcher's process groups; tests/security/test_sandbox.py tests the sandbox."""
    env = {"PYTHONPATH": str(REPO), **kw.pop("env", {})}
    sandbox = kw.pop("sandbox", "none")
    return WorkerCall(
        MODULE, Script(code=code, **kw), Answer, timeout_s=timeout_s, env=env, sandbox=sandbox
    )
