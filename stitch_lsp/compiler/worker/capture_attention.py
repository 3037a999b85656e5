"""scaled_dot_product_attention kept whole through the ATen-level trace.

make_fx decomposes `F.scaled_dot_product_attention` into its math form, and off CUDA that form
upcasts bf16/fp16 to float32: two FP32 batched GEMMs and a float32 softmax where the model ran
one fused attention in its own precision. While tracing, a torch-function mode routes every
call to one opaque custom op, `stitch_capture::scaled_dot_product_attention`, whose real kernel
is PyTorch's own sdpa; the graph then holds one node that the `attn` lowering turns into a
flash-style kernel (or, where that does not apply, the math form on cuBLAS).

Attention with dropout is left to the decomposition: it draws random numbers, which the trace
shows and the converter refuses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DEFAULTS: dict[str, Any] = {
    "attn_mask": None,
    "dropout_p": 0.0,
    "is_causal": False,
    "scale": None,
    "enable_gqa": False,
}


@torch.library.custom_op("stitch_capture::scaled_dot_product_attention", mutates_args=())
def _sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> torch.Tensor:
    # Run for real only inside a trace (a data-dependent module's CPU run, opaque_modules),
    # where F's sdpa is this op's own entry: the ATen function itself, past any mode.
    with torch._C.DisableTorchFunction():
        return torch._C._nn.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )


@_sdpa.register_fake
def _sdpa_fake(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> torch.Tensor:
    return query.new_empty((*query.shape[:-1], value.shape[-1]))


ATTENTION_OP = torch.ops.stitch_capture.scaled_dot_product_attention.default
_SDPA = torch._C._nn.scaled_dot_product_attention


def bound_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """sdpa's arguments by name, defaults filled; None for a call this op does not take."""
    if len(args) > len(_NAMES) or any(k not in _NAMES for k in kwargs):
        return None
    bound = dict(zip(_NAMES, args, strict=False))
    if any(k in bound for k in kwargs):
        return None
    bound.update(kwargs)
    for name, default in _DEFAULTS.items():
        bound.setdefault(name, default)
    if any(name not in bound for name in _NAMES[:3]):
        return None
    if not all(isinstance(bound[n], torch.Tensor) for n in _NAMES[:3]):
        return None
    mask = bound["attn_mask"]
    if mask is not None and not isinstance(mask, torch.Tensor):
        return None
    if float(bound["dropout_p"]) != 0.0:
        return None  # random: left to the decomposition, which says so
    scale = bound["scale"]
    if scale is not None and not isinstance(scale, (int, float)):
        return None
    return bound


class _WholeAttention(TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is _SDPA:
            return _whole_sdpa(*args, **kwargs)
        return func(*args, **kwargs)


def _whole_sdpa(*args: Any, **kwargs: Any) -> Any:
    """F.scaled_dot_product_attention while tracing: one op where it applies."""
    bound = bound_arguments(args, kwargs)
    if bound is None:
        return _SDPA(*args, **kwargs)
    scale = bound["scale"]
    return ATTENTION_OP(
        bound["query"],
        bound["key"],
        bound["value"],
        bound["attn_mask"],
        0.0,
        bool(bound["is_causal"]),
        None if scale is None else float(scale),
        bool(bound["enable_gqa"]),
    )


@contextlib.contextmanager
def attention_as_one_op() -> Iterator[None]:
    """While tracing, sdpa is one graph node (see the module docstring).

    The mode sees calls from user code; it does not see calls made inside a torch function it
    hands on, because a mode is off while it handles one. `F.multi_head_attention_forward` (every
    nn.MultiheadAttention, so nn.Transformer* and torchvision's ViT) is such a function and calls
    sdpa through `torch.nn.functional`'s global: that name is rebound for the trace as well."""
    F = torch.nn.functional
    saved = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _whole_sdpa
    try:
        with _WholeAttention():
            yield
    finally:
        F.scaled_dot_product_attention = saved
