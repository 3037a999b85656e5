"""Ends a job's process groups when the actor that owns them dies.

Why: the worker runs in its own session, so when Ray kills the actor (a forced cancel, the
driver gone, an out-of-memory kill) nothing would stop the worker and the candidate it runs.
The actor starts this watchdog next to itself; it notes the process group of every child the
actor starts and, once the actor is gone, kills those groups. Linux only (it reads /proc);
elsewhere it exits at once and the actor's own cancel is the only guard.

Usage (started by `node.JobRunner`): `main([ACTOR_PID])`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

POLL_S = 0.1
READY = "watching"


def _stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ..."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """The process's start time (field 22), which tells it apart from a later one with the
    same pid; None when it is gone or a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] == "Z":
        return None
    return fields[19]


def children(parent: int) -> set[int]:
    """Direct children of `parent`, from each of its threads' `children` list (cheap: no scan
    of every process); a scan of /proc where the kernel does not provide those lists."""
    kids: set[int] = set()
    tasks = Path(f"/proc/{parent}/task")
    try:
        for task in tasks.iterdir():
            kids.update(int(p) for p in (task / "children").read_text().split())
        return kids
    except FileNotFoundError:
        pass
    except OSError:
        return kids
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields is not None and int(fields[1]) == parent:
                kids.add(int(entry.name))
    return kids


def child_groups(parent: int, skip: set[int]) -> set[int]:
    """Process groups of `parent`'s children, other than those in `skip`."""
    groups: set[int] = set()
    for pid in children(parent):
        fields = _stat(pid)
        if fields is not None and int(fields[1]) == parent and int(fields[2]) not in skip:
            groups.add(int(fields[2]))
    return groups


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(parent: int, poll_s: float = POLL_S) -> int:
    born = start_time(parent)
    if born is None or not Path("/proc").is_dir():
        return 0
    skip = {os.getpgid(parent), os.getpgrp()}
    groups: set[int] = child_groups(parent, skip)
    with contextlib.suppress(OSError):  # the actor runs no job before this line
        print(READY, flush=True)
    while start_time(parent) == born:
        groups = {g for g in groups if group_exists(g)} | child_groups(parent, skip)
        time.sleep(poll_s)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: watchdog ACTOR_PID (started by stitch-lsp)", file=sys.stderr)
        return 2
    return watch(int(argv[0]))
