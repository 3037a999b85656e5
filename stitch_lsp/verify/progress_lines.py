"""The progress lines `stitch-lsp verify` prints on stderr, so a long run is never silent.

Each stage is told as it starts; while one lasts (a `load_inline` build compiles torch's
headers for about a minute, a slow correctness run longer), a line every `HEARTBEAT_S` seconds
says it is still going and for how long.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

HEARTBEAT_S = 15.0

# What the CLI adds to a stage's name, for a reader who wonders why it takes so long.
_DETAIL = {"building": "building with nvcc or load_inline (a load_inline build takes a minute)"}


class ProgressLines:
    """`verify: <stage> (<s since start> s)` per stage, then `verify: still <stage> (<s> s)`
    every `interval` seconds of the same stage. A context manager: leaving it stops the beat."""

    def __init__(
        self, stream: TextIO | None = None, interval: float | None = None, prefix: str = "verify"
    ) -> None:
        self._stream = stream
        self._interval = HEARTBEAT_S if interval is None else interval
        self._prefix = prefix
        self._started = time.monotonic()
        self._stage = ""
        self._stage_started = self._started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="verify-heartbeat", daemon=True)

    def __enter__(self) -> ProgressLines:
        self._thread.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def stage(self, name: str) -> None:
        """A new stage began: say so at once."""
        now = time.monotonic()
        with self._lock:
            self._stage, self._stage_started = name, now
            self._say(f"{_DETAIL.get(name, name)} ({now - self._started:.1f} s)")

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if self._stage:
                    lasted = time.monotonic() - self._stage_started
                    self._say(f"{_still(self._stage)} ({lasted:.0f} s)")

    def _say(self, text: str) -> None:
        stream = self._stream or sys.stderr
        print(f"{self._prefix}: {text}", file=stream, flush=True)


def _still(stage: str) -> str:
    """'still building', 'still checking correctness'; 'still on static checks'."""
    first = stage.split(" ", 1)[0]
    return f"still {stage}" if first.endswith("ing") else f"still on {stage}"
