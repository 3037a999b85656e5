"""The faster of two ways to compute one stage, timed once on the device that runs it.

A generated program's attention stage has two implementations that write the same output: the
program's own flash kernel, and PyTorch's `scaled_dot_product_attention` (cuDNN or
FlashAttention, tuned for the card). Which is faster depends on the card and the shapes: on an
H100 the vendor's wgmma kernels outrun an mma.sync kernel on long sequences, while a short
decode step may favour ours. As the GEMM launchers time cuBLASLt's candidates on their first
call, `TimedChoice` runs both on the first plain call (the runner's warm-up, outside any CUDA
graph capture), keeps the vendor only when it takes under `MARGIN` of our time, and from then on
runs the one it kept; inside a capture with nothing decided yet it runs ours. `picked` says what
each site runs, and `times_ms` what the timing saw.

This module needs only torch and the standard library, so it can be inlined into a candidate
that has to stand alone.
"""

from collections.abc import Callable
from typing import Any

from stitch_lsp.runtime.cuda_timing import median_ms

OURS, VENDOR = "ours", "vendor"
MARGIN = 0.9  # the vendor is kept only below this fraction of our time (timings are noisy)
RUNS = 5


def _cuda_ms(fn: Callable[[], Any], runs: int) -> float:
    """The median GPU time of `fn` on the current stream, in milliseconds, after one warm
    run. GPU time alone: the programs replay under a CUDA graph, where the host's work per
    path (a ctypes call for ours; views, dispatch and a possible copy for sdpa) is gone, and
    timing it favours ours wherever the kernels take a few microseconds (ViT-S on an H200:
    ours was kept at every site, though its split kernel and combine take 20.4 us of GPU time
    a site and cuDNN's 6.2 us)."""
    fn()
    return median_ms(fn, runs, gpu_only=True)


def _capturing() -> bool:
    import torch

    return not torch.cuda.is_available() or torch.cuda.is_current_stream_capturing()


class TimedChoice:
    """Per site, ours or the vendor's, decided by timing on first use (see the module)."""

    def __init__(
        self,
        timer: Callable[[Callable[[], Any], int], float] = _cuda_ms,
        capturing: Callable[[], bool] = _capturing,
    ) -> None:
        self.timer = timer
        self.capturing = capturing
        self.picked: dict[str, str] = {}
        self.times_ms: dict[str, dict[str, float]] = {}
        self.notes: dict[str, str] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> "TimedChoice":
        # A copied module may sit on another card: it decides afresh.
        return TimedChoice(self.timer, self.capturing)

    def run(self, site: str, ours: Callable[[], Any], vendor: Callable[[], Any]) -> Any:
        """What the kept implementation returns (the stage's output tensor)."""
        name = self.picked.get(site)
        if name is None:
            if self.capturing():
                return ours()
            name = self._decide(site, ours, vendor)
        return (vendor if name == VENDOR else ours)()

    @staticmethod
    def into(out: Any, value: Any) -> Any:
        """`value` itself where it already lies as `out` does (sdpa's output, transposed back,
        usually does), else `out` with `value` copied in: the vendor's path then costs no copy."""
        same = (
            value.shape == out.shape
            and value.dtype == out.dtype
            and value.device == out.device
            and value.is_contiguous()
        )
        return value if same else out.copy_(value)

    def _decide(self, site: str, ours: Callable[[], Any], vendor: Callable[[], Any]) -> str:
        mine = self.timer(ours, RUNS)
        try:
            theirs = self.timer(vendor, RUNS)
        except Exception as exc:  # the vendor cannot take this case (a mask type, a head size)
            self.notes[site] = f"vendor failed: {type(exc).__name__}: {exc}"[:200]
            self.picked[site] = OURS
            return OURS
        self.times_ms[site] = {OURS: mine, VENDOR: theirs}
        self.picked[site] = VENDOR if theirs < MARGIN * mine else OURS
        return self.picked[site]
