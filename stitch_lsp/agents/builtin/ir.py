"""A small, torch-free graph IR between capture and codegen.

Views are not nodes: every use of a value carries the shape it is read with (all values are
contiguous, so a reshape only changes how the flat index is split). Transposes are only allowed
as a GEMM operand flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Shape = tuple[int, ...]


class Unsupported(Exception):
    """The builtin coder cannot handle this module; the message says why."""


@dataclass(frozen=True)
class Use:
    """A read of value `vid` with the shape it has at that point (after any views)."""

    vid: int
    shape: Shape
    trans: bool = False  # last two dims transposed (a GEMM operand only)


@dataclass(frozen=True)
class Const:
    value: float


Operand = Use | Const

LeafKind = Literal["input", "param", "buffer", "factory"]  # factory: torch.randn(...) in forward


@dataclass
class Leaf:
    """A tensor that exists before forward's work starts: an input, a parameter or a buffer."""

    vid: int
    kind: LeafKind
    expr: str  # Python expression in ModelNew.forward: `x`, `self.gemm.weight`
    shape: Shape
    dtype: str = "float32"


# Elementwise functions: name -> number of operands. Their C bodies live in templates.py.
EW_ARITY: dict[str, int] = {
    "add": 2,
    "sub": 2,
    "mul": 2,
    "div": 2,
    "maximum": 2,
    "minimum": 2,
    "pow": 2,
    "neg": 1,
    "abs": 1,
    "exp": 1,
    "log": 1,
    "log1p": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "reciprocal": 1,
    "square": 1,
    "relu": 1,
    "relu6": 1,
    "leaky_relu": 1,
    "elu": 1,
    "selu": 1,
    "gelu": 1,
    "gelu_tanh": 1,
    "sigmoid": 1,
    "tanh": 1,
    "silu": 1,
    "mish": 1,
    "hardswish": 1,
    "hardsigmoid": 1,
    "hardtanh": 1,
    "softplus": 1,
    "clamp": 1,
    "lse_finish": 2,  # max + log(sumexp), as torch.logsumexp
}

# Reductions and the fields they yield. Every field has the keepdim shape of the input.
REDUCE_FIELDS: dict[str, tuple[str, ...]] = {
    "sum": ("sum",),
    "max": ("max",),
    "min": ("min",),
    "moments": ("mean", "var"),  # biased variance, as the normalisations use
    "softmax": ("max", "sumexp"),  # online max and sum(exp(x - max))
    "argmax": ("index",),  # int64 result: may only be returned, not computed on
    "argmin": ("index",),
}


@dataclass
class Node:
    """One op. kind 'ew' and 'reduce' are fusible; 'gemm' and 'conv' call vendor libraries."""

    vid: int
    kind: Literal["ew", "reduce", "pool", "gemm", "conv", "bn_update", "rnn", "rnn_out"]
    fn: str
    args: list[Operand]
    shape: Shape
    params: dict[str, object] = field(default_factory=dict)
    origin: str = ""  # what the reference wrote, e.g. "torch.relu (line 23)"
    line: int | None = None

    @property
    def uses(self) -> list[Use]:
        return [a for a in self.args if isinstance(a, Use)]


@dataclass
class Graph:
    leaves: dict[int, Leaf] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)  # topological order
    outputs: list[Use] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    defaulted: dict[str, object] = field(default_factory=dict)  # forward params left at defaults
    _next: int = 0

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def add_leaf(self, kind: LeafKind, expr: str, shape: Shape, dtype: str = "float32") -> Leaf:
        leaf = Leaf(self.new_id(), kind, expr, tuple(shape), dtype)
        self.leaves[leaf.vid] = leaf
        return leaf

    def add(
        self,
        kind: Literal["ew", "reduce", "pool", "gemm", "conv", "bn_update", "rnn", "rnn_out"],
        fn: str,
        args: list[Operand],
        shape: Shape,
        origin: str = "",
        line: int | None = None,
        **params: object,
    ) -> Node:
        node = Node(self.new_id(), kind, fn, list(args), tuple(shape), dict(params), origin, line)
        self.nodes.append(node)
        return node

    def node(self, vid: int) -> Node | None:
        for n in self.nodes:
            if n.vid == vid:
                return n
        return None

    def shape_of(self, vid: int) -> Shape:
        if vid in self.leaves:
            return self.leaves[vid].shape
        node = self.node(vid)
        assert node is not None, vid
        return node.shape

    def summary(self) -> str:
        lines = []
        for leaf in self.leaves.values():
            lines.append(f"%{leaf.vid} = {leaf.kind} {leaf.expr} {list(leaf.shape)}")
        for n in self.nodes:
            args = ", ".join(
                f"%{a.vid}{list(a.shape)}{'^T' if a.trans else ''}"
                if isinstance(a, Use)
                else repr(a.value)
                for a in n.args
            )
            extra = f" {n.params}" if n.params else ""
            lines.append(f"%{n.vid} = {n.kind}.{n.fn}({args}){extra} -> {list(n.shape)}")
        lines.append("return " + ", ".join(f"%{u.vid}{list(u.shape)}" for u in self.outputs))
        return "\n".join(lines)


def numel(shape: Shape) -> int:
    return math.prod(shape)


def broadcast_shapes(*shapes: Shape) -> Shape:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        padded = (1,) * (rank - len(s)) + tuple(s)
        for i, d in enumerate(padded):
            if d == 1:
                continue
            if out[i] not in (1, d):
                raise Unsupported(f"shapes {shapes} do not broadcast")
            out[i] = d
    return tuple(out)


def strip_ones(shape: Shape) -> Shape:
    """Leading size-1 dims do not change a contiguous layout."""
    s = list(shape)
    while s and s[0] == 1:
        s.pop(0)
    return tuple(s)
