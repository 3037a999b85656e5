"""A module and its capture rule, for tests of the leaf-module hook: `ScaleShift` returns
(x * weight + 1, x * weight); its rule builds that in IR through the LeafCall helpers."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from stitch_lsp.compiler.ir import Const, Use

CALLS: list[dict[str, Any]] = []


class ScaleShift(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * self.weight + 1.0, x * self.weight


def capture_scale_shift(call: Any) -> Any:
    x = call.args[0]
    assert isinstance(x, Use)
    CALLS.append({"path": call.path, "expr": call.expr, "shapes": call.shapes(), "line": call.line})
    w = call.param("weight")
    y = call.add("ew", "mul", [x, w], x.shape)
    z = call.add("ew", "add", [y, Const(1.0)], x.shape)
    return (z, y)  # a tuple, as a recurrent module returns (output, state)


def scale_shift_outputs(module: nn.Module, x: torch.Tensor) -> Any:
    return (torch.empty_like(x), torch.empty_like(x))
