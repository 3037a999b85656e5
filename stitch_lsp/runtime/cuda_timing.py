"""The median time of a callable on the current CUDA stream, by CUDA events.

Shared by the attention choice in generated programs and the agents' profiling worker. Needs
only torch and the standard library, so it can be inlined into a candidate that has to stand
alone.
"""

import statistics
from collections.abc import Callable
from typing import Any

# GPU cycles of the spin that `gpu_only` timing puts ahead of each run (about 0.25 ms at the
# H200's 1.98 GHz): longer than the host takes to enqueue a stage's launches.
SPIN_CYCLES = 500_000


def median_ms(fn: Callable[[], Any], runs: int, gpu_only: bool = False) -> float:
    """The median of `runs` timings of `fn`, in milliseconds (no warm-up run: callers that
    need one make it). With `gpu_only`, a spin kernel keeps the GPU busy while the host
    enqueues `fn`, so the events time its kernels alone, not the host's launch work: what a
    stage costs inside a replayed CUDA graph, where that host work is gone."""
    import torch

    spin = getattr(torch.cuda, "_sleep", None) if gpu_only else None  # private: may be absent
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin is not None:
            spin(SPIN_CYCLES)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
