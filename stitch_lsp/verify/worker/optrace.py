"""What the reference's forward computes, operator by operator (runs in the worker; imports torch).

One forward under a dispatch mode gives two things the Verifier needs:

- the ATen operators it runs, so attribution knows whether the reference is one heavy op alone
  (`attribution.heavy_alone`): `nn.Linear` is `t` and `addmm`, `nn.Conv2d` is `convolution`;
- its FLOPs, as `FlopCounterMode` counts them, and the FLOPs any correct program must do at the
  least. A convolution's count assumes the direct algorithm; Winograd and FFT convolutions
  (which cuDNN picks for 3x3 and 5x5 windows) do fewer multiplications, at best about one per
  output element, input channel and batch, so its floor is the direct count divided by the
  window's size. A roofline floor built on the direct count called an honest fused
  ConvTranspose2d program faster than possible on the H200.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from stitch_lsp.verify.attribution import heavy_family


@dataclass
class ReferenceTrace:
    ops: list[str] = field(default_factory=list)  # overload packets, in call order
    flops: int = 0  # as FlopCounterMode counts them (direct convolutions)
    flops_floor: int = 0  # what any algorithm must do at the least
    note: str | None = None  # why the trace is incomplete, when it is


def conv_window(weight: Any) -> int:
    """The number of taps of a convolution's window (kh * kw, or kd * kh * kw), at least 1."""
    shape = getattr(weight, "shape", None)
    if shape is None or len(shape) < 3:
        return 1
    return max(1, math.prod(int(s) for s in shape[2:]))


def floor_flops(op: str, flops: int, args: Sequence[Any]) -> int:
    """The FLOPs of one operator that no algorithm avoids: a convolution's direct count over
    its window size (fast algorithms), everything else as counted."""
    if heavy_family(op) == "conv" and len(args) > 1:
        return flops // conv_window(args[1])
    return flops


def trace(model: Callable[..., Any], inputs: Sequence[Any]) -> ReferenceTrace:
    """Run one forward of `model` and note every operator and its FLOPs."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    out = ReferenceTrace()

    class _Trace(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            packet = func.overloadpacket
            name = getattr(packet, "__name__", str(packet))
            out.ops.append(name)
            count = flop_registry.get(packet)
            if count is not None:
                try:
                    n = int(count(*args, **kwargs, out_val=result))
                except Exception:  # a formula that does not know this overload: no FLOPs
                    n = 0
                out.flops += n
                out.flops_floor += floor_flops(name, n, args)
            return result

    try:
        with torch.no_grad(), _Trace():
            model(*inputs)
    except Exception as exc:  # an op the mode cannot pass through: what was seen stands
        out.note = f"trace stopped: {type(exc).__name__}: {exc}"[:300]
    return out
