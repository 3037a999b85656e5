"""How long the event loop was ever blocked: a task that sleeps a short period and measures how
late it wakes up. Start-up (until `initialized` is done) is counted apart from serving.

Anything that holds the loop (a parse, a disk read, a sync handler) shows as lateness. The
server starts it when `STITCH_LOOP_WATCHDOG` is set (the test suite and the benchmarks set it);
`stitch/debugInfo` reports it, and with `STITCH_LOOP_REPORT=FILE` the server appends its figures
to FILE as one JSON line when it exits, so a whole test run can be summed up. With
`STITCH_LOOP_TRACE=1` a block of 100 ms prints every thread's stack to stderr as it happens.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

PERIOD_S = 0.02


class LoopWatchdog:
    """Lateness of a periodic wake-up: the longest, the count over 100 ms, and what was being
    handled (`current()`) when the longest happened."""

    def __init__(self, current: Callable[[], str | None] | None = None) -> None:
        self.current = current or (lambda: None)
        self.max_ms = 0.0
        self.worst_during: str | None = None
        self.samples = 0
        self.over_100ms = 0
        self.gc_max_ms = 0.0  # the longest cyclic-GC pause seen (any thread)
        # Until `ready()` (the end of `initialized`) the server imports, compiles its queries
        # and builds its first converters: one-time costs, counted apart from serving.
        self.ready_at: float | None = None
        self.startup_max_ms = 0.0
        self._gc_started = 0.0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_env(cls, current: Callable[[], str | None] | None = None) -> LoopWatchdog | None:
        return cls(current) if os.environ.get("STITCH_LOOP_WATCHDOG") else None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self.gc_max_ms = max(self.gc_max_ms, (time.perf_counter() - self._gc_started) * 1e3)

    async def _run(self) -> None:
        # STITCH_LOOP_TRACE=1: when the loop misses its next wake-up by 100 ms, faulthandler
        # (a C thread, which needs no GIL) prints every thread's stack to stderr: the culprit.
        trace = bool(os.environ.get("STITCH_LOOP_TRACE"))
        while True:
            before = self.current()
            t0 = time.perf_counter()
            if trace:
                faulthandler.dump_traceback_later(PERIOD_S + 0.1, file=sys.stderr)
            await asyncio.sleep(PERIOD_S)
            late_ms = (time.perf_counter() - t0 - PERIOD_S) * 1000.0
            if self.ready_at is None or t0 < self.ready_at:
                self.startup_max_ms = max(self.startup_max_ms, late_ms)
                continue
            self.samples += 1
            if late_ms > 100.0:
                self.over_100ms += 1
            if late_ms > self.max_ms:
                self.max_ms = late_ms
                self.worst_during = self.current() or before

    def ready(self) -> None:
        """The server has started: lateness from now on is what serving costs."""
        if self.ready_at is None:
            self.ready_at = time.perf_counter()

    def reset(self) -> None:
        """Forget the serving figures so far: a benchmark measures one phase at a time."""
        self.max_ms, self.worst_during, self.samples, self.over_100ms = 0.0, None, 0, 0

    def figures(self) -> dict[str, Any]:
        return {
            "maxLagMs": round(self.max_ms, 1),
            "startupMaxLagMs": round(self.startup_max_ms, 1),
            "worstDuring": self.worst_during,
            "samples": self.samples,
            "over100ms": self.over_100ms,
            "gcMaxMs": round(self.gc_max_ms, 1),
        }

    def write_report(self) -> None:
        """Append the figures to $STITCH_LOOP_REPORT (one JSON line), if it is set."""
        path = os.environ.get("STITCH_LOOP_REPORT")
        if not path:
            return
        line = {"pid": os.getpid(), "test": os.environ.get("PYTEST_CURRENT_TEST")}
        line.update(self.figures())
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        except OSError as exc:
            print(f"stitch-lsp: could not write the loop report: {exc}", file=sys.stderr)
