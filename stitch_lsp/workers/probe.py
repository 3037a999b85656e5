"""Short questions to a workers' Python (its version, its import folders, whether torch is there).

A probe runs the user's chosen interpreter, which may be a wrapper script that hangs or leaves
children behind; it runs in its own session and, on a timeout, its whole group is killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile


def run_probe(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` from a neutral folder and return its exit code and stdout. On a timeout its
    whole group is killed before TimeoutExpired is raised: a child left holding the output pipe
    would otherwise keep the caller waiting on it. OSError when it cannot start."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
        start_new_session=True,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        raise
    # A probe that answered may still have left a child in its group (a wrapper's background
    # job); nothing of a probe outlives it.
    _kill_group(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
