"""Visible GPUs, and a pool that runs many verify jobs with at most one per GPU at a time.

Torch-free: `nvidia-smi -L`, narrowed by CUDA_VISIBLE_DEVICES the way CUDA narrows it, so
counting GPUs never creates a CUDA context in the calling process.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_GPU_LINE = re.compile(r"^GPU (\d+):[^\n]*?(?:\(UUID: ([^)\s]+)\))?[ \t]*$", re.MULTILINE)


def visible_gpus(*, timeout_s: float = 20.0) -> list[str]:
    """`cuda:K` for every GPU this process (and its workers) can use; [] when there is none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in {"", "-1"}:
        return []
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    gpus = _GPU_LINE.findall(out.stdout)
    if visible is None:
        return [f"cuda:{i}" for i in range(len(gpus))]
    indices = {idx for idx, _ in gpus}
    uuids = {uuid for _, uuid in gpus}
    count = 0
    for entry in (v.strip() for v in visible.split(",")):
        # CUDA stops at the first entry it cannot resolve.
        if entry in indices or entry in uuids or any(u.startswith(entry) for u in uuids):
            count += 1
        else:
            break
    return [f"cuda:{i}" for i in range(count)]


class DevicePool:
    """Hands out GPUs, one job per GPU; `acquire` blocks until one is free."""

    def __init__(self, devices: Sequence[str] | None = None) -> None:
        self.devices = list(devices) if devices is not None else visible_gpus()
        self._free: queue.Queue[str] = queue.Queue()
        for d in self.devices:
            self._free.put(d)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.devices)

    @contextmanager
    def acquire(self, timeout: float | None = None) -> Iterator[str]:
        if not self.devices:
            raise RuntimeError("no CUDA GPU visible: nothing to run GPU jobs on")
        device = self._free.get(timeout=timeout)
        try:
            yield device
        finally:
            self._free.put(device)

    def map(self, fn: Callable[[T, str], R], jobs: Iterable[T]) -> list[R]:
        """`fn(job, device)` for every job, one job per GPU at a time, results in job order."""
        items = list(jobs)
        if not items:
            return []

        def run(job: T) -> R:
            with self.acquire() as device:
                return fn(job, device)

        with ThreadPoolExecutor(max_workers=max(1, len(self.devices))) as ex:
            return list(ex.map(run, items))
