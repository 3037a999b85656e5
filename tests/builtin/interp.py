"""Evaluate a captured IR graph with eager torch ops on the CPU.

This checks capture (op normalisation, decompositions, views, broadcasts) against the
reference without a GPU; the CUDA that codegen emits is checked by the GPU tests. Elementwise
ops are evaluated from the op catalog's torch references, so a new catalog entry is covered
here without a new branch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from stitch_lsp.compiler.catalog import EW
from stitch_lsp.compiler.ir import Const, Graph, Node, Use
from stitch_lsp.compiler.layout import strides_of


def _model_value(model: torch.nn.Module, path: str) -> torch.Tensor:
    owner, _, name = path.rpartition(".")
    return getattr(model.get_submodule(owner), name)


def read(env: dict[int, Any], u: Use) -> Any:
    """A use of a stored value: its storage (contiguous) read with the use's view."""
    t = env[u.vid]
    if not isinstance(t, torch.Tensor):  # a PyTorch fallback's tuple of results
        return t
    if not u.strided and not u.trans:
        return t.reshape(u.shape)
    flat = t.contiguous().reshape(-1)
    return flat.as_strided(u.shape, strides_of(u), u.offset)


def _coords(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = shape[-2] if len(shape) >= 2 else 1
    cols = shape[-1] if shape else 1
    r = torch.arange(rows).reshape(rows, 1).expand(rows, cols)
    c = torch.arange(cols).reshape(1, cols).expand(rows, cols)
    return r, c


def ew(n: Node, args: list[Any]) -> torch.Tensor:
    op = EW[n.fn]
    names = "abc"
    scope: dict[str, Any] = {"torch": torch, "F": F}
    for i, a in enumerate(args):
        t = torch.as_tensor(a, dtype=torch.float32) if not isinstance(a, torch.Tensor) else a
        if op.index or all(not isinstance(x, torch.Tensor) for x in args):
            t = t.expand(n.shape) if t.dim() <= len(n.shape) else t
        scope[names[i]] = t
    for k, v in n.params.items():
        if k != "dtype":
            scope[k] = v
    for p in op.params:  # parameters the op was captured without take their default
        scope.setdefault(p.name, p.default)
    out = torch.as_tensor(eval(op.ref, scope))
    # A kernel broadcasts every operand to the node's shape, even where none has it whole
    # (`where(mask (1, 1, q, k), 0.0, -inf)` for a (b, 1, q, k) mask expanded in the reference).
    return out.expand(n.shape) if tuple(out.shape) != tuple(n.shape) else out


def gather(n: Node, args: list[torch.Tensor]) -> torch.Tensor:
    p = n.params
    if n.fn == "cat":
        # predicates are stored as 1.f / 0.f; a float64 run keeps its precision
        wide = torch.float64 if any(a.dtype == torch.float64 for a in args) else torch.float32
        return torch.cat([a.to(wide) for a in args], int(p["dim"]))  # type: ignore[arg-type]
    if n.fn == "pad":
        before = list(p["before"])  # type: ignore[arg-type]
        after = [o - i - b for o, i, b in zip(n.shape, args[0].shape, before, strict=True)]
        pads: list[int] = []
        for b, a in zip(reversed(before), reversed(after), strict=True):
            pads += [b, a]
        return F.pad(args[0], pads, value=float(p["value"]))  # type: ignore[arg-type]
    if n.fn == "embedding":
        return F.embedding(args[1], args[0])
    raise AssertionError(n.fn)


def run_graph(
    graph: Graph, model: torch.nn.Module, inputs: list[torch.Tensor]
) -> list[torch.Tensor]:
    env = run_graph_env(graph, model, inputs)
    return [env[u.vid].reshape(u.shape) for u in graph.outputs]


def run_graph_env(
    graph: Graph, model: torch.nn.Module, inputs: list[torch.Tensor]
) -> dict[int, Any]:
    """Every value of the graph by id, each stored contiguously (a fallback's tuple as it is)."""
    env: dict[int, Any] = {}
    by_name = dict(zip(graph.input_names, inputs, strict=False))
    for leaf in graph.leaves.values():
        env[leaf.vid] = (
            by_name[leaf.expr] if leaf.kind == "input" else _model_value(model, str(leaf.path))
        )

    def val(a: Use | Const) -> Any:
        if isinstance(a, Const):
            return a.value
        return read(env, a)

    for n in graph.nodes:
        args = [val(a) for a in n.args]
        if n.kind not in ("aten", "bn_update", "index_store"):  # kernels compute in float
            args = [_as_float(a) for a in args]
        p = n.params
        if n.kind == "ew":
            out = ew(n, args)
            if n.dtype == "int64":  # an index computed elementwise (argmax over size-1 dims)
                out = out.long()
        elif n.kind == "gather":
            out = gather(n, args)
        elif n.kind == "scan":
            out = torch.cumsum(args[0], int(p["axis"]))  # type: ignore[arg-type]
        elif n.kind == "reduce":
            x, axes = args[0], tuple(p["axes"])  # type: ignore[arg-type]
            field = p["field"]
            if n.fn == "sum":
                out = x.sum(axes, keepdim=True)
            elif n.fn in ("max", "min"):
                out = x.amax(axes, keepdim=True) if n.fn == "max" else x.amin(axes, keepdim=True)
            elif n.fn in ("argmax", "argmin"):
                fn = torch.argmax if n.fn == "argmax" else torch.argmin
                out = fn(x, dim=axes[0], keepdim=True)
            elif n.fn == "moments":
                var, mean = torch.var_mean(x, axes, keepdim=True, correction=0)
                out = mean if field == "mean" else var
            else:
                m = x.amax(axes, keepdim=True)
                out = m if field == "max" else torch.exp(x - m).sum(axes, keepdim=True)
        elif n.kind == "pool":
            nd = len(n.shape) - 2
            if n.fn == "max_pool":
                fn = getattr(F, f"max_pool{nd}d")
                out = fn(args[0], p["kernel"], p["stride"], p["padding"], p["dilation"])
                if tuple(out.shape) != tuple(n.shape):  # ceil_mode
                    out = fn(args[0], p["kernel"], p["stride"], p["padding"], p["dilation"], True)
            else:
                fn = getattr(F, f"avg_pool{nd}d")
                cip = p.get("clipped") != "inside"
                out = fn(args[0], p["kernel"], p["stride"], p["padding"], False, cip)
                if tuple(out.shape) != tuple(n.shape):  # ceil_mode
                    out = fn(args[0], p["kernel"], p["stride"], p["padding"], True, cip)
        elif n.kind == "gemm":
            out = torch.matmul(args[0], args[1])
            if len(args) > 2:
                out = out + args[2]
                if p.get("epilogue") == "relu_bias":
                    out = torch.relu(out)
                elif p.get("epilogue") == "gelu_bias":
                    out = F.gelu(out, approximate="tanh")
        elif n.kind == "conv":
            w = args[1]
            if n.fn.startswith("conv_transpose"):
                fn = getattr(F, n.fn)
                out = fn(
                    args[0],
                    w,
                    None,
                    p["stride"],
                    p["padding"],
                    p["output_padding"],
                    p["groups"],
                    p["dilation"],
                )
            else:
                x = args[0].permute(0, 3, 1, 2) if p.get("channels_last") else args[0]
                out = getattr(F, n.fn)(
                    x, w, None, p["stride"], p["padding"], p["dilation"], p["groups"]
                )
                if p.get("channels_last"):
                    out = out.permute(0, 2, 3, 1)
        elif n.kind == "attn":  # the flash kernel: fp32 math on the stored bf16/fp16 values
            q, k, v, *mask = args
            m = mask[0] if mask else None
            if m is not None and p["mask"] == "bool":
                m = m != 0
            if m is not None and m.shape[0] not in (1, q.shape[0]):  # repeats every m.shape[0]
                m = m.repeat(q.shape[0] // m.shape[0], 1, 1, 1)
            out = F.scaled_dot_product_attention(
                q, k, v, m, is_causal=bool(p["causal"]), scale=float(p["scale"]),  # type: ignore[arg-type]
                enable_gqa=q.shape[1] != k.shape[1],
            ).transpose(1, 2)  # fmt: skip
        elif n.kind == "aten":  # the traced ATen call, as the program runs it
            if (
                str(p["call"]).startswith("torch.ops.aten.histc.")
                and not args[0].is_floating_point()
            ):
                # CUDA counts integers (transformers' expert routing traced as on a GPU); the
                # CPU has no integer kernel, and small integers count the same as floats
                args = [args[0].double(), *args[1:]]
            slots = [f"_a{i}" for i in range(len(args))]
            scope = {
                "torch": torch,
                "dev": torch.device("cpu"),
                "self": model,  # a data-dependent submodule, called by its path
                **dict(zip(slots, args, strict=True)),
            }
            out = eval(str(p["call"]).format(*slots), scope)
            if n.dtype in ("tuple", "effect"):
                env[n.vid] = out
                continue
        elif n.kind == "index_store":
            source, index, buffer = args
            with torch.no_grad():
                buffer.index_copy_(int(p["dim"]), index, source.to(buffer.dtype))  # type: ignore[call-overload]
            continue
        elif n.kind == "bn_update":
            mean, var, rm, rv, nbt = args
            count = int(p["count"])  # type: ignore[call-overload]
            m = 1.0 / (float(nbt) + 1.0) if p["momentum"] is None else float(p["momentum"])  # type: ignore[arg-type]
            with torch.no_grad():
                rm.mul_(1 - m).add_(m * mean.reshape(-1))
                rv.mul_(1 - m).add_(m * var.reshape(-1) * count / (count - 1))
                nbt.add_(1)
            continue
        else:
            raise AssertionError(n.kind)
        out = out.reshape(n.shape).contiguous()
        if n.kind != "aten" and n.dtype in _HALF:  # rounded as PyTorch rounds the op's result
            out = out.to(_HALF[n.dtype])
        env[n.vid] = out
    return env


_HALF = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _as_float(a: Any) -> Any:
    """A bf16/fp16 operand as the float a kernel's load makes of it."""
    if isinstance(a, torch.Tensor) and a.dtype in (torch.bfloat16, torch.float16):
        return a.float()
    return a
