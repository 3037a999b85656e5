"""ATen fallbacks: an op the builtin coder cannot lower runs as its own ATen call in the program.

As Inductor's fallback kernels do, the op stays a PyTorch call between the generated kernels
(`torch.ops.aten.embedding.default(leaves[0], input_ids)`), so one op the catalogue lacks does
not refuse a whole model. A fallback is an `aten` IR node: its call is a Python expression with
`{i}` slots for its tensor operands (the node's args), written here from the traced node's own
arguments, so the program and the tests' interpreter run exactly what the trace recorded.

What may not fall back, and why:
- the heavy ops (GEMMs, convolutions, attention): a program whose heavy work stays in PyTorch
  is not a CUDA implementation;
- in-place and other mutating ops: the IR's values are never written twice;
- random ops: the candidate could not draw the reference's numbers;
- ops whose arguments are not plain values (a Python object, a symbolic size).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from stitch_lsp.compiler.ir import Shape, Unsupported, Use, float_source
from stitch_lsp.compiler.ops import is_anchor

# dtypes a fallback's result may have, as IR dtype names; kernels read only float32 and bool.
DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
    # an FFT's spectrum (FNet's token mixing): only PyTorch lines read it, kernels never do
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}
# What a generated kernel reads from a stored value (`codegen._in_ctype`); int64 only as
# indices (the builder refuses integer math, which then falls back too).
KERNEL_READABLE = frozenset({"float32", "bfloat16", "float16", "bool", "int64"})

# ATen packets that stay refused: the heavy ops (a GEMM, a convolution or attention left in
# PyTorch is the "fake CUDA" the Verifier rejects), and ops that only make sense in training.
_HEAVY = frozenset(
    {
        "mm",
        "bmm",
        "addmm",
        "addbmm",
        "baddbmm",
        "matmul",
        "linear",
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cudnn_convolution",
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "lstm",
        "gru",
        "rnn_tanh",
        "rnn_relu",
    }
)


def _packet(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else str(target)


def heavy(target: Any) -> bool:
    """A GEMM, convolution or attention op: it is the program's work, never a fallback."""
    name = _packet(target)
    return name in _HEAVY or is_anchor(name)


@dataclass
class Call:
    """One traced ATen call as source text: `{i}` marks its i-th tensor operand."""

    template: str
    operands: list[Use] = field(default_factory=list)


class NotPlain(Exception):
    """An argument that has no source spelling here."""


def _literal(v: Any, call: Call, value_of: Any) -> str:
    if isinstance(v, torch.fx.Node):
        return _literal(value_of(v), call, value_of)
    if isinstance(v, Use):
        call.operands.append(v)
        return "{" + str(len(call.operands) - 1) + "}"
    if isinstance(v, str):
        return repr(v).replace("{", "{{").replace("}", "}}")  # the template is format()ted
    if v is None or isinstance(v, (bool, int)):
        return repr(v)
    if isinstance(v, float):
        return float_source(v)
    if isinstance(v, torch.dtype):
        return str(v)  # torch.float32
    if isinstance(v, torch.device):
        return "dev"  # the device the program runs on (traced on the meta device)
    if isinstance(v, torch.layout):
        return str(v)  # torch.strided
    if isinstance(v, torch.memory_format):
        return str(v)  # torch.contiguous_format
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_literal(x, call, value_of) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    raise NotPlain(type(v).__name__)


def python_literal(value: Any) -> str:
    """`value` (numbers, including inf and nan, strings, and lists of them) as Python source
    that needs no import, ready for `str.format`: `float('-inf')`, where repr writes `-inf`."""
    return _literal(value, Call(""), None)


def spelled_arguments(args: Any, kwargs: dict[str, Any], value_of: Any = None) -> Call:
    """`a, b, name=c` as a template: each tensor operand (a `Use`, or an fx node `value_of`
    maps to one) is a slot `{i}`, everything else a literal."""
    call = Call("")
    spelled = [_literal(a, call, value_of) for a in args]
    spelled += [f"{k}={_literal(v, call, value_of)}" for k, v in kwargs.items()]
    call.template = ", ".join(spelled)
    return call


def spelled_call(
    n: torch.fx.Node, value_of: Any, target: Any = None, args: tuple[Any, ...] | None = None
) -> Call:
    """`torch.ops.aten.<packet>.<overload>(args, name=kwargs)`, operands as slots; `target`
    replaces the node's op (an in-place op's out-of-place twin), `args` its arguments."""
    target = n.target if target is None else target
    packet = getattr(target, "overloadpacket", None)
    overload = getattr(target, "_overloadname", None)
    if packet is None or overload is None:
        raise Unsupported("not an ATen operator")
    call = spelled_arguments(n.args if args is None else args, dict(n.kwargs), value_of)
    call.template = f"torch.ops.aten.{packet.__name__}.{overload}({call.template})"
    return call


IN_PLACE = "it writes to a tensor in place"


def refusal(n: torch.fx.Node) -> str | None:
    """Why node `n` may not run as a fallback, or None if it may (IN_PLACE: only as its
    out-of-place twin, or as a state update of a buffer)."""
    target = n.target
    schema = getattr(target, "_schema", None)
    if schema is None:
        return "it is not an ATen operator"
    if heavy(target):
        return "it is the heavy op, which the generated program must compute itself"
    tags = getattr(target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return "it draws random numbers"
    if schema.is_mutable:
        return IN_PLACE
    return None


def out_of_place(target: Any) -> Any:
    """`aten.add_.Tensor` -> `aten.add.Tensor`: the op that returns what the in-place one
    writes; None where there is none, or it does not write its first argument only."""
    schema = getattr(target, "_schema", None)
    name = _packet(target)
    if schema is None or not name.endswith("_") or name.startswith("__"):
        return None
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if len(written) != 1 or written[0] is not schema.arguments[0]:
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def result_dtypes(n: torch.fx.Node) -> list[tuple[Shape, str]] | None:
    """(shape, IR dtype) of each tensor the node returns, or None if one is not a plain tensor."""
    val = n.meta.get("val")
    items = val if isinstance(val, (list, tuple)) else [val]
    out = []
    for t in items:
        if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
            return None
        out.append((tuple(int(d) for d in t.shape), DTYPES[t.dtype]))
    return out


def returns_alias(target: Any) -> bool:
    """The op's result may share memory with an argument (a view), so the program copies it:
    an argument may live in the planned arena, whose bytes a later stage reuses."""
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)
