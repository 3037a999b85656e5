"""What the two capture paths share: walking an fx graph onto the IR builder.

`Converter` is the skeleton (the node loop, argument binding, outputs); `capture_fx` and
`capture_aten` say how their nodes are described and dispatched, and both find an op's lowering
in one table (`lowering`).
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
import types
from pathlib import Path
from typing import Any

import torch
import torch.fx

import stitch_lsp
from stitch_lsp.compiler import layout
from stitch_lsp.compiler.attr_path import comment_text
from stitch_lsp.compiler.builder import Builder
from stitch_lsp.compiler.ir import Graph, Shape, Unsupported, Use

_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (\w+)')


def draws_random(n: torch.fx.Node) -> bool:
    """An ATen call that draws from the random generator (its result is not a function of its
    operands, and leaving it out shifts every later draw)."""
    return n.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(
        n.target, "tags", ()
    )


def line_in(stack_trace: str | None, path: str | None) -> int | None:
    """The innermost line of the reference file in a stack trace (else of any `forward`)."""
    frames = _FRAME.findall(stack_trace or "")
    mine = [int(ln) for f, ln, _ in frames if path is not None and f == path]
    if mine:
        return mine[-1]
    fwd = [int(ln) for _, ln, fn in frames if fn == "forward"]
    return fwd[-1] if fwd else None


# -- where in a library an op is -----------------------------------------------------------------
# A model from transformers, torchvision or timm is called by one line of the reference
# (`return self.model(x)`), so a refusal also names the library line that runs the op: the
# innermost frame that is neither tracing machinery (torch itself, this package, the standard
# library) nor the reference.

_PACKAGE_DIRS = ("site-packages", "dist-packages")


def _real(path: str) -> str:
    return os.path.realpath(path)


@functools.cache
def _machinery_roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(torch's and this package's folders, the standard library's folders)."""
    own = (os.path.dirname(torch.__file__), os.path.dirname(stitch_lsp.__file__))
    paths = sysconfig.get_paths()
    std = tuple(paths[k] for k in ("stdlib", "platstdlib") if k in paths)
    return tuple(_real(r) + os.sep for r in own), tuple(_real(r) + os.sep for r in std)


@functools.cache
def _is_machinery(file: str) -> bool:
    """Torch (its operators, fx, nn modules: the vocabulary the reference is read in), this
    package's tracers and the standard library: frames that say how an op ran, not where."""
    if file.startswith("<"):  # generated code, frozen modules
        return True
    real = _real(file)
    own, std = _machinery_roots()
    if real.startswith(own):
        return True
    in_packages = any(d in Path(real).parts for d in _PACKAGE_DIRS)
    return real.startswith(std) and not in_packages  # site-packages may sit in the stdlib


@functools.cache
def _same_file(a: str, b: str) -> bool:
    return a == b or _real(a) == _real(b)


def short_path(file: str, reference: str | None) -> str:
    """A library file as a reader knows it: relative to the site-packages (or dist-packages)
    folder that holds it, else to the reference's folder, else to the home folder (`~/...`),
    else as given; never the absolute home path where a shorter form exists."""
    parts = Path(file).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _PACKAGE_DIRS and i + 1 < len(parts):
            return "/".join(parts[i + 1 :])
    if reference and Path(file).is_relative_to(Path(reference).parent):
        return Path(file).relative_to(Path(reference).parent).as_posix()
    home = Path.home()
    if str(home) not in ("", "/") and Path(file).is_relative_to(home):
        return "~/" + Path(file).relative_to(home).as_posix()
    return file


def library_frame(frames: list[tuple[str, int]], path: str | None) -> str | None:
    """`file:line` of the innermost frame outside the machinery, unless that frame is the
    reference's own (then the reference line says it all). Frames run outermost first."""
    for file, line in reversed(frames):
        if _is_machinery(file):
            continue
        if path is not None and _same_file(file, path):
            return None
        return f"{short_path(file, path)}:{line}"
    return None


def reference_line(frames: list[tuple[str, int]], path: str | None) -> int | None:
    """The innermost line of the reference itself (no fallback: "called from" means it)."""
    mine = [ln for f, ln in frames if path is not None and _same_file(f, path)]
    return mine[-1] if mine else None


def stack_frames(stack_trace: str | None) -> list[tuple[str, int]]:
    """(file, line) of a recorded fx stack trace, outermost first."""
    return [(f, int(ln)) for f, ln, _ in _FRAME.findall(stack_trace or "")]


def traceback_frames(tb: types.TracebackType | None) -> list[tuple[str, int]]:
    """(file, line) of an exception's traceback, outermost first."""
    out: list[tuple[str, int]] = []
    while tb is not None:
        out.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return out


def where_suffix(frames: list[tuple[str, int]], path: str | None) -> str:
    """` (at lib.py:N, called from line M)` where a library frame is innermost, else ``."""
    lib = library_frame(frames, path)
    if lib is None:
        return ""
    ref = reference_line(frames, path)
    return f" (at {lib}, called from line {ref})" if ref else f" (at {lib})"


def located(what: str, line: int | None, frames: list[tuple[str, int]], path: str | None) -> str:
    """`what` with where it is, for a refusal: `what (line 12)` as in the IR, or, where a library
    runs it, `what (at transformers/models/gpt2/modeling_gpt2.py:812, called from line 14)`."""
    suffix = where_suffix(frames, path)
    if suffix:
        return what + suffix
    return f"{what} (line {line})" if line else what


def shape_or_none(node: torch.fx.Node) -> Shape | None:
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return tuple(int(d) for d in v.shape)
    return None


# The keyword aliases PyTorch's functions take for NumPy compatibility, by the name they stand for.
_ALIASES: dict[str, str] = {"dim": "axis", "keepdim": "keepdims"}


class Missing:
    """A result of a multi-output op that the IR does not compute (batch norm's saved mean)."""

    def __init__(self, where: str) -> None:
        self.where = where


class Converter:
    """One fx graph onto one `Builder`. Subclasses give `what`, `spelled`, `out_shape` and
    `convert`."""

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
            label = self.label(node)
            self.b.at(label, self.line(node), shape_or_none(node))
            if node.op == "output":
                self.output(node.args[0])
                continue
            try:
                self.env[node] = self.convert(node)
            except Unsupported as exc:
                moved = self.relocated(exc, node, label)
                if moved is exc:
                    raise
                raise moved from exc
        self.g.prune()
        return self.g

    def what(self, node: torch.fx.Node) -> str:
        """The op as the reference spells it (`torch.arange`, `.view()`, `self.conv`)."""
        raise NotImplementedError

    def label(self, node: torch.fx.Node) -> str:
        """The IR node's description (kernel comments): the op and its reference line only, so
        generated code does not depend on where a library is installed."""
        ln = self.line(node)
        what = self.what(node)
        return f"{what} (line {ln})" if ln else what

    def desc(self, node: torch.fx.Node) -> str:
        """The op for a refusal: its label, or the library line that runs it and the reference
        line that calls it."""
        frames = stack_frames(node.meta.get("stack_trace"))
        return located(self.what(node), self.line(node), frames, self.path)

    def relocated(self, exc: Unsupported, node: torch.fx.Node, label: str) -> Unsupported:
        """A refusal the builder raised under the node's label (`Builder.fail`), with `desc`'s
        library location in its place; any other refusal as it is."""
        text, head, full = str(exc), comment_text(label) + ": ", self.desc(node)
        if full == label or text.startswith(full) or not text.startswith(head):
            return exc
        return Unsupported(f"{full}: {text[len(head) :]}")

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
        """One positional-or-keyword argument, evaluated; PyTorch's NumPy-style keyword aliases
        (`torch.cumsum(x, axis=1)`, `x.sum(axis=0, keepdims=True)`) count as their names."""
        if len(n.args) > i:
            return self.val(n.args[i])
        if name not in n.kwargs and _ALIASES.get(name) in n.kwargs:
            return self.val(n.kwargs[_ALIASES[name]])
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
