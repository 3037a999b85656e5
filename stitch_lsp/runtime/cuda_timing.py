"""The median time of a callable on the current CUDA stream, by CUDA events.

Shared by the attention choice in generated programs and the agents' profiling worker. Needs
only torch and the standard library, so it can be inlined into a candidate that has to stand
alone.
"""

import statistics
from collections.abc import Callable
from typing import Any


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    """The median of `runs` timings of `fn`, in milliseconds (no warm-up run: callers that
    need one make it)."""
    import torch

    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
