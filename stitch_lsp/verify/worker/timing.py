"""Timing with CUDA events, KernelBench style but stricter (runs in the worker; imports torch).

Warm-up runs first; then each timed run flushes the L2 with a 256 MB write, rotates through
several input sets (so nothing stays cached across runs), and is bracketed by events on the
current stream. The first timed run is discarded.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from stitch_lsp.models.verify import TimingStats

L2_FLUSH_BYTES = 256 * 1024 * 1024


class L2Flusher:
    def __init__(self, device: torch.device) -> None:
        self.buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.fill_(0x5A5A)


def stats(samples_ms: Sequence[float]) -> TimingStats:
    xs = list(samples_ms)
    return TimingStats(
        median=statistics.median(xs),
        mean=statistics.fmean(xs),
        std=statistics.pstdev(xs) if len(xs) > 1 else 0.0,
        min=min(xs),
        max=max(xs),
        n=len(xs),
    )


def time_cuda(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    *,
    trials: int,
    warmup: int,
    flush: L2Flusher,
    keep_run: int | None = None,
    kept: list[tuple[int, Any]] | None = None,
) -> list[float]:
    """Per-run milliseconds of `fn(*inputs)`, measured on the current stream.

    With `keep_run` (1..trials) and `kept`, the result of that timed run is appended to `kept`
    with the index of its input set, so it can be checked: a candidate that behaves otherwise
    when timed, or after many calls, is then caught on the run that was measured."""
    stream = torch.cuda.current_stream()
    with torch.no_grad():
        for i in range(warmup):
            fn(*input_sets[i % len(input_sets)])
        torch.cuda.synchronize()
        out: list[float] = []
        for i in range(trials + 1):
            inputs = input_sets[i % len(input_sets)]
            flush()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            result = fn(*inputs)
            end.record(stream)
            end.synchronize()
            if kept is not None and i == keep_run:
                kept.append((i % len(input_sets), result))
            del result
            if i:
                out.append(start.elapsed_time(end))
        torch.cuda.synchronize()
    return out


def pending_after_stream(
    fn: Callable[..., Any], inputs: Sequence[Any], *, runs: int = 7
) -> tuple[float, float, float]:
    """How much device work outlives the current stream's end event.

    Returns (least ms the device stayed busy after the current stream finished, median event
    ms, median device-synchronised wall ms). An honest module finishes all its work on the
    current stream (or joins it back), so the first number is a few microseconds. It is a host
    clock reading, and a busy host only ever adds to it, so the least of several runs is the
    one to trust.
    """
    stream = torch.cuda.current_stream()
    pending: list[float] = []
    events: list[float] = []
    walls: list[float] = []
    with torch.no_grad():
        for _ in range(runs):
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record(stream)
            fn(*inputs)
            end.record(stream)
            end.synchronize()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            pending.append((t2 - t1) * 1e3)
            events.append(start.elapsed_time(end))
            walls.append((t2 - t0) * 1e3)
    return min(pending), statistics.median(events), statistics.median(walls)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy rate in bytes/s (read + write): the ceiling for memory-bound code."""
    n = nbytes // 4
    src = torch.empty(n, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (min(samples) * 1e-3)


class GraphReplay:
    """The reference replayed under a CUDA graph, the way a user would wrap a model.

    Static input buffers are filled by a copy on every call, and every call returns fresh
    output storage (a clone of the graph's outputs): both are inside the timed region, so the
    column is what wrapping the model costs and gives, not a replay that returns stale memory.
    """

    def __init__(self, model: Callable[..., Any], example: Sequence[Any], *, warmup: int = 3):
        self.static_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in example]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(warmup):  # capture needs warmed-up libraries (cuBLAS handles, ...)
                model(*self.static_in)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.static_out = model(*self.static_in)

    def __call__(self, *inputs: Any) -> Any:
        for dst, src in zip(self.static_in, inputs, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        self.graph.replay()
        return _clone_tree(self.static_out)


def _clone_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [_clone_tree(v) for v in value]
    if isinstance(value, tuple):
        items = [_clone_tree(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def tf32_on() -> bool:
    """Whether either TF32 flag is on right now (checked before each timed column)."""
    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)
