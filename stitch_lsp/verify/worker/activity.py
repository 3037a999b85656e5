"""Device activity of one callable, from torch.profiler (CUPTI): this process's work only.

Each recorded forward is wrapped in marker kernels on the current stream and synchronised, so
the records can be split by forward and nothing else of ours runs in between (see timeline.py).
Used for the system-level timeline and for the side-stream check, which must hold when other
processes share the GPU: CUPTI reports only the calling process's activity, and GPU timestamps
are not affected by what the host is doing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from stitch_lsp.verify.timeline import Activity, Call, split_calls

MARKER_CYCLES = 2_000  # about a microsecond of torch.cuda._sleep


def record(fn: Callable[..., Any], inputs: Sequence[Any], *, calls: int = 3) -> list[Call]:
    """Profile `calls` forwards, each between two markers; raises RecordingError when the
    records cannot be split (no CUPTI, or forged markers)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.cuda._sleep(MARKER_CYCLES)
            out = fn(*inputs)
            torch.cuda._sleep(MARKER_CYCLES)
            torch.cuda.synchronize()
            del out
    return split_calls(device_activities(prof), calls)


def host_ms(fn: Callable[..., Any], inputs: Sequence[Any], *, runs: int = 5) -> float:
    """Median host time of one call (Python and launches; the GPU is idle when it starts)."""
    samples = []
    with torch.no_grad():
        for _ in range(runs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*inputs)
            samples.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
            del out
    return statistics.median(samples)


def device_activities(prof: Any) -> list[Activity]:
    """The GPU kernels, copies and memsets of a finished torch.profiler session."""
    device = torch.cuda.current_device()
    out: list[Activity] = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        if getattr(e, "is_user_annotation", lambda: False)():
            continue
        if e.device_index() != device:
            continue
        name = e.name()
        kind = (
            "memcpy"
            if name.startswith("Memcpy")
            else "memset"
            if name.startswith("Memset")
            else "kernel"
        )
        start = int(e.start_ns())
        end = int(e.end_ns()) if hasattr(e, "end_ns") else start + int(e.duration_ns())
        out.append(
            Activity(
                name=name, stream=int(e.device_resource_id()), start_ns=start, end_ns=end, kind=kind
            )
        )
    return out
