"""What the two capture paths share: walking an fx graph onto the IR builder.

`Converter` is the skeleton (the node loop, argument binding, outputs); `capture_fx` and
`capture_aten` say how their nodes are described and dispatched, and both find an op's lowering
in one table (`lowering`).
"""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.builder import Builder
from stitch_lsp.compiler.ir import Graph, Shape, Unsupported, Use

_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (\w+)')


def line_in(stack_trace: str | None, path: str | None) -> int | None:
    """The innermost line of the reference file in a stack trace (else of any `forward`)."""
    frames = _FRAME.findall(stack_trace or "")
    mine = [int(ln) for f, ln, _ in frames if path is not None and f == path]
    if mine:
        return mine[-1]
    fwd = [int(ln) for _, ln, fn in frames if fn == "forward"]
    return fwd[-1] if fwd else None


def shape_or_none(node: torch.fx.Node) -> Shape | None:
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return tuple(int(d) for d in v.shape)
    return None


class Missing:
    """A result of a multi-output op that the IR does not compute (batch norm's saved mean)."""

    def __init__(self, where: str) -> None:
        self.where = where


class Converter:
    """One fx graph onto one `Builder`. Subclasses give `desc`, `spelled`, `out_shape` and
    `convert`; `level` tells a lowering which spelling it is reading ("fx" or "aten")."""

    level = ""

    def __init__(self, gm: torch.fx.GraphModule, path: str | None) -> None:
        self.gm = gm
        self.path = path
        self.b = Builder()
        self.env: dict[torch.fx.Node, Any] = {}
        self.placeholders = 0

    @property
    def g(self) -> Graph:
        return self.b.g

    def run(self) -> Graph:
        for node in self.gm.graph.nodes:
            self.b.at(self.desc(node), self.line(node), shape_or_none(node))
            if node.op == "output":
                self.output(node.args[0])
                continue
            self.env[node] = self.convert(node)
        self.g.prune()
        return self.g

    def desc(self, node: torch.fx.Node) -> str:
        raise NotImplementedError

    def convert(self, node: torch.fx.Node) -> Any:
        raise NotImplementedError

    def spelled(self, n: torch.fx.Node) -> str:
        """The bare name the node calls (`amax`, `_safe_softmax`, `max_pool2d_with_indices`)."""
        raise NotImplementedError

    def out_shape(self, n: torch.fx.Node) -> Shape | None:
        """The node's result shape, as the path checks it."""
        raise NotImplementedError

    def state_leaf(self, n: torch.fx.Node, name: str) -> Use:
        """A buffer of the model by its path (a batch norm's num_batches_tracked)."""
        raise NotImplementedError

    def line(self, node: torch.fx.Node) -> int | None:
        return line_in(node.meta.get("stack_trace"), self.path)

    # -- values ----------------------------------------------------------------------------------
    def val(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            v = self.env[a]
            if isinstance(v, Missing):
                raise Unsupported(f"{v.where}: this result of the op is not supported")
            return v
        if isinstance(a, (tuple, list)):
            return type(a)(self.val(x) for x in a)
        if isinstance(a, dict):
            return {k: self.val(x) for k, x in a.items()}
        if isinstance(a, slice):
            return slice(self.val(a.start), self.val(a.stop), self.val(a.step))
        return a

    def arg(self, n: torch.fx.Node, i: int, name: str, default: Any = None) -> Any:
        """One positional-or-keyword argument, evaluated."""
        if len(n.args) > i:
            return self.val(n.args[i])
        return self.val(n.kwargs.get(name, default))

    def args(self, n: torch.fx.Node, *spec: tuple[str, Any]) -> list[Any]:
        """Positional-or-keyword arguments by (name, default), evaluated."""
        return [self.arg(n, i, name, default) for i, (name, default) in enumerate(spec)]

    def tensor(self, n: torch.fx.Node, i: int = 0, name: str = "input") -> Use:
        v = self.arg(n, i, name)
        if not isinstance(v, Use):
            raise Unsupported(f"{self.desc(n)}: expected a tensor argument")
        return v

    def sizes(self, n: torch.fx.Node, i: int, name: str) -> Any:
        """A size list that a method may spell as varargs (`x.view(2, 3)`, `x.permute(0, 2, 1)`)."""
        rest = [self.val(v) for v in n.args[i:]]
        if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)):
            return rest[0]
        if rest:
            return rest
        return self.val(n.kwargs.get(name))

    # -- outputs ---------------------------------------------------------------------------------
    def output(self, out: Any) -> None:
        items = out if isinstance(out, (tuple, list)) else (out,)
        for item in items:
            val = self.val(item)
            if not isinstance(val, Use):
                raise Unsupported("forward must return a tensor or a tuple of tensors")
            self.g.outputs.append(self.output_value(val))

    def output_value(self, u: Use) -> Use:
        if self.b.dtype_of(u.vid) == "bool":
            raise Unsupported("forward returns a bool tensor")
        u = layout.canonical(u, self.b.storage(u))
        if not layout.is_contiguous(u) or u.vid in self.g.leaves:
            u = self.b.copy(u)
        return u
