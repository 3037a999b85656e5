"""Attention masks that forward builds from shapes alone, evaluated while capturing.

transformers builds a decoder's mask from `arange` comparisons, and under a trace it also keeps
a "packed sequence" term computed from position ids that forward itself made with `arange`: its
check that the term is all zeros is skipped on fake tensors. The mask is then a constant of the
input's shape, held as a (batch, 1, query, key) boolean tensor that the attention kernel reads
element by element. Evaluated here once, on the CPU, a mask that is exactly the causal pattern
becomes `is_causal` and one that keeps every key becomes no mask, which is what eager's own
sdpa call gets outside a trace: the flash kernel then skips the tiles above the diagonal and
reads no mask. A mask that depends on an input, a parameter or a random draw is left alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
import torch.fx

from stitch_lsp.compiler.worker.capture_attention import ATTENTION_OP
from stitch_lsp.compiler.worker.converter import draws_random

MAX_MASK_ELEMENTS = 1 << 26  # larger masks are left as they are: evaluating them costs memory
_MASK, _CAUSAL = 3, 5  # positions of attn_mask and is_causal in ATTENTION_OP's arguments


def fold_constant_masks(gm: torch.fx.GraphModule) -> str | None:
    """Replace constant causal / keep-all masks of the attention nodes; what was done, in words
    for the candidate's docstring, or None where nothing was."""
    done: list[str] = []
    kept: dict[torch.fx.Node, torch.Tensor | None] = {}  # every layer reads the same mask
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not ATTENTION_OP or node.kwargs:
            continue
        args = list(node.args)
        mask = args[_MASK] if len(args) > _MASK else None
        if not isinstance(mask, torch.fx.Node):
            continue
        if mask not in kept:
            value = _evaluate(gm, mask)
            kept[mask] = None if value is None else _kept(value)
        keep = kept[mask]
        if keep is None:
            continue
        lq, lk = keep.shape[-2:]
        if bool(keep.all()):
            args[_MASK] = None
            done.append("no mask")
        elif not args[_CAUSAL] and bool(
            (keep == torch.ones(lq, lk, dtype=torch.bool).tril()).all()
        ):
            args[_MASK], args[_CAUSAL] = None, True
            done.append("is_causal")
        else:
            continue
        node.args = tuple(args)
    if not done:
        return None
    gm.graph.eliminate_dead_code()
    gm.recompile()
    counts = ", ".join(f"{n} became {what}" for what, n in Counter(done).items())
    return f"attention masks built from shapes alone, evaluated at capture: {counts}"


def _kept(value: torch.Tensor) -> torch.Tensor | None:
    """Which keys a mask keeps: a boolean mask as it is; an additive one only where every entry
    is 0 (kept) or at most half the dtype's lowest value (dropped by softmax). Anything else (a
    position bias, ALiBi) is not a mask of kept keys."""
    if value.dim() < 2:
        return None
    if value.dtype == torch.bool:
        return value
    if not value.is_floating_point():
        return None
    low = torch.finfo(value.dtype).min / 2
    zero = value == 0
    if not bool((zero | (value <= low)).all()):
        return None
    return zero


def _evaluate(gm: torch.fx.GraphModule, target: torch.fx.Node) -> torch.Tensor | None:
    """The node's value computed on the CPU, when it depends on nothing but constants."""
    val = target.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.numel() > MAX_MASK_ELEMENTS:
        return None
    needed: set[torch.fx.Node] = set()
    stack = [target]
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        if n.op in ("placeholder", "output"):
            return None  # an input or a parameter: not a constant
        if draws_random(n):
            return None
        if n.op == "get_attr":
            t = getattr(gm, str(n.target), None)
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                return None
        needed.add(n)
        stack.extend(n.all_input_nodes)
    sub = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        if n in needed:
            env[n] = sub.node_copy(n, lambda x: env[x])
            env[n].kwargs = {k: _on_cpu(v) for k, v in env[n].kwargs.items()}
    sub.output(env[target])
    try:
        with torch.no_grad():
            out = torch.fx.GraphModule(gm, sub)()
    except Exception:  # an op that does not run on the CPU: the mask stays as it is
        return None
    return out if isinstance(out, torch.Tensor) and out.device.type == "cpu" else None


def _on_cpu(value: Any) -> Any:
    """A traced `device=` argument: the trace ran on the meta device, the evaluation runs here."""
    if isinstance(value, torch.device) and value.type == "meta":
        return torch.device("cpu")
    return value
