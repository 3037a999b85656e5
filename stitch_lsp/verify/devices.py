"""A pool that runs many verify jobs with at most one per GPU at a time (GPUs from the one
inventory, `stitch_lsp.gpus`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from stitch_lsp.gpus import visible_gpus

T = TypeVar("T")
R = TypeVar("R")


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
