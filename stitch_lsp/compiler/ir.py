"""A small, torch-free graph IR between capture and codegen.

Views are not nodes: every use of a value carries the shape it is read with. Every value is
stored contiguously, so a reshape only changes how the flat index is split; a use may also carry
element strides and an offset into that storage (permute, transpose, slices, expand, unfold),
which the consumer folds into its index math. `trans` is the older GEMM-operand spelling of a
last-two-dims transpose of a contiguous value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from stitch_lsp.compiler.catalog import EW_OPS

Shape = tuple[int, ...]


class Unsupported(Exception):
    """The builtin coder cannot handle this module; the message says why."""


@dataclass(frozen=True)
class Use:
    """A read of value `vid` with the shape it has at that point (after any views)."""

    vid: int
    shape: Shape
    trans: bool = False  # last two dims transposed (a GEMM operand only)
    strides: tuple[int, ...] | None = None  # element strides into vid's storage; None: contiguous
    offset: int = 0  # element offset into vid's storage (with strides)

    @property
    def strided(self) -> bool:
        """Read through strides (or at an offset) rather than by the consumer's flat index."""
        return self.strides is not None or self.offset != 0


@dataclass(frozen=True)
class Const:
    value: float


Operand = Use | Const


def float_source(v: float) -> str:
    """A number as generated Python writes it: `float('inf')` and `float('nan')`, which repr
    would leave as names no module defines."""
    if math.isnan(v):
        return "float('nan')"
    if math.isinf(v):
        return "float('inf')" if v > 0 else "float('-inf')"
    return repr(v)


LeafKind = Literal["input", "param", "buffer", "factory"]  # factory: torch.randn(...) in forward


@dataclass
class Leaf:
    """A tensor that exists before forward's work starts: an input, a parameter or a buffer."""

    vid: int
    kind: LeafKind
    expr: str  # how a reader sees it: `x`, `self.gemm.weight` (an input's name is its argument)
    shape: Shape
    dtype: str = "float32"
    path: str | None = None  # params, buffers: the dotted attribute path, e.g. `gemm.weight`


# Elementwise functions: name -> number of operands (the op catalog holds them all).
EW_ARITY: dict[str, int] = {op.name: op.arity for op in EW_OPS}

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


# ew, reduce: fused by the flat index of their group. pool, gather: fused too, but they read
# their (materialised) input at other positions: windows, concatenation, padding, table lookups.
# scan: a prefix sum along one dim, its own kernel. attn: scaled_dot_product_attention as one
# flash-style kernel (params: causal, scale, mask "" | "bool" | "add"; args q, k, v[, mask] as
# 4-D uses with unit-stride rows), stored as (batch, query, head, value). gemm, conv: vendor
# libraries. bn_update: the running-stat side effect of a training-mode batch norm. rnn,
# rnn_out: a recurrent module and its other results (recurrent.py). aten: an op the coder cannot
# lower, run as its traced ATen call between the kernels (params: `call`, the expression with
# `{i}` operand slots; `dtype`; `why` it falls back; `copy` when its result may alias an
# operand). index_store: `buffer.index_copy_(dim, index, source)` as a store of the kernel that
# computes `source` (args source, index, buffer; param `dim`), a side effect like bn_update.
NodeKind = Literal[
    "ew",
    "reduce",
    "pool",
    "gather",
    "scan",
    "gemm",
    "conv",
    "attn",
    "bn_update",
    "index_store",
    "rnn",
    "rnn_out",
    "aten",
]


@dataclass
class Node:
    """One op. kind 'ew' and 'reduce' are fusible; 'gemm' and 'conv' call vendor libraries."""

    vid: int
    kind: NodeKind
    fn: str
    args: list[Operand]
    shape: Shape
    params: dict[str, object] = field(default_factory=dict)
    origin: str = ""  # what the reference wrote, e.g. "torch.relu (line 23)"
    line: int | None = None

    @property
    def uses(self) -> list[Use]:
        return [a for a in self.args if isinstance(a, Use)]

    @property
    def dtype(self) -> str:
        """float32, or bool for predicates (1.f / 0.f in registers), int64 for arg-reductions."""
        return str(self.params.get("dtype", "float32"))


@dataclass
class Graph:
    leaves: dict[int, Leaf] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)  # topological order
    outputs: list[Use] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    defaulted: dict[str, object] = field(default_factory=dict)  # forward params left at defaults
    recomputed: set[int] = field(default_factory=set)  # set by partition: never stored
    notes: list[str] = field(default_factory=list)  # what capture simplified, for the docstring
    _next: int = 0

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def add_leaf(
        self,
        kind: LeafKind,
        expr: str,
        shape: Shape,
        dtype: str = "float32",
        path: str | None = None,
    ) -> Leaf:
        leaf = Leaf(self.new_id(), kind, expr, tuple(shape), dtype, path)
        self.leaves[leaf.vid] = leaf
        return leaf

    def add(
        self,
        kind: NodeKind,
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

    def prune(self) -> None:
        """Drop nodes and leaves that nothing returned depends on (running-stat updates count)."""
        live = {u.vid for u in self.outputs}
        kept: list[Node] = []
        for n in reversed(self.nodes):
            if n.vid in live or n.kind == "bn_update" or n.params.get("effect"):
                kept.append(n)
                live |= {u.vid for u in n.uses}
        # A live recurrent node keeps all its results: its launcher decides what it writes.
        kept_ids = {n.vid for n in kept}
        kept += [
            n
            for n in self.nodes
            if n.kind == "rnn_out" and n.vid not in kept_ids and n.uses[0].vid in live
        ]
        order = {n.vid: i for i, n in enumerate(self.nodes)}
        self.nodes = sorted(kept, key=lambda n: order[n.vid])
        self.leaves = {
            vid: leaf for vid, leaf in self.leaves.items() if vid in live or leaf.kind == "input"
        }

    def summary(self) -> str:
        lines = []
        for leaf in self.leaves.values():
            lines.append(f"%{leaf.vid} = {leaf.kind} {leaf.expr} {list(leaf.shape)}")

        def use_text(u: Use) -> str:
            view = f"@{u.offset}{list(u.strides or ())}" if u.strided else ""
            return f"%{u.vid}{list(u.shape)}{'^T' if u.trans else ''}{view}"

        for n in self.nodes:
            args = ", ".join(use_text(a) if isinstance(a, Use) else repr(a.value) for a in n.args)
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
