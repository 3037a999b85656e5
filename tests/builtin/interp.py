"""Evaluate a captured IR graph with eager torch ops on the CPU.

This checks capture (op normalisation, decompositions, views, broadcasts) against the
reference without a GPU; the CUDA that codegen emits is checked by the GPU tests.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from stitch_lsp.agents.builtin.ir import Const, Graph, Use

_EW = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "pow": torch.pow,
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "relu": torch.relu,
    "relu6": F.relu6,
    "selu": F.selu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "silu": F.silu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
}


def _model_value(model: torch.nn.Module, expr: str) -> torch.Tensor:
    obj: Any = model
    for part in expr.removeprefix("self.").replace("[", ".").replace("]", "").split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def run_graph(
    graph: Graph, model: torch.nn.Module, inputs: list[torch.Tensor]
) -> list[torch.Tensor]:
    env: dict[int, torch.Tensor] = {}
    by_name = dict(zip(graph.input_names, inputs, strict=False))
    for leaf in graph.leaves.values():
        env[leaf.vid] = (
            by_name[leaf.expr] if leaf.kind == "input" else _model_value(model, leaf.expr)
        )

    def val(a: Use | Const) -> Any:
        if isinstance(a, Const):
            return a.value
        t = env[a.vid].reshape(a.shape) if not a.trans else env[a.vid]
        if a.trans:
            s = a.shape
            t = t.reshape(*s[:-2], s[-1], s[-2]).transpose(-1, -2)
        return t

    for n in graph.nodes:
        args = [val(a) for a in n.args]
        p = n.params
        if n.kind == "ew":
            if n.fn == "leaky_relu":
                out = F.leaky_relu(args[0], float(p["slope"]))
            elif n.fn == "elu":
                out = F.elu(args[0], float(p["alpha"]))
            elif n.fn in ("hardtanh", "clamp"):
                out = torch.clamp(args[0], p.get("lo"), p.get("hi"))
            elif n.fn == "softplus":
                out = F.softplus(args[0], float(p["beta"]), float(p["threshold"]))
            elif n.fn == "lse_finish":
                out = args[0] + torch.log(args[1])
            elif n.fn in ("add", "sub", "mul", "div", "maximum", "minimum", "pow"):
                a, b = (torch.as_tensor(x) for x in args)
                out = _EW[n.fn](a, b)
            else:
                out = _EW[n.fn](*args)
        elif n.kind == "reduce":
            x, axes = args[0], tuple(p["axes"])
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
            else:
                fn = getattr(F, f"avg_pool{nd}d")
                out = fn(args[0], p["kernel"], p["stride"], p["padding"])
        elif n.kind == "gemm":
            out = torch.matmul(args[0], args[1])
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
                out = getattr(F, n.fn)(
                    args[0], w, None, p["stride"], p["padding"], p["dilation"], p["groups"]
                )
        elif n.kind == "bn_update":
            mean, var, rm, rv, nbt = args
            m, count = float(p["momentum"]), int(p["count"])
            with torch.no_grad():
                rm.mul_(1 - m).add_(m * mean.reshape(-1))
                rv.mul_(1 - m).add_(m * var.reshape(-1) * count / (count - 1))
                nbt.add_(1)
            continue
        else:
            raise AssertionError(n.kind)
        env[n.vid] = out.reshape(n.shape)
    return [env[u.vid].reshape(u.shape) for u in graph.outputs]
