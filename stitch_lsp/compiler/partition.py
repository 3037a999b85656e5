"""Split the IR graph into library calls and fused kernels.

Heavy ops (GEMM, conv) each become a library call, and a prefix sum (scan) its own kernel.
Every other op joins the open fusion group when it can be computed from the group's flat index:
elementwise ops over the group's full shape, reductions over one common layout, elementwise ops
on the reduced values, and gathers (pooling windows, concatenation, padding) that read stored
inputs. Anything else closes the group; values that cross a group boundary are written to
memory. A value read through strides (a permute, a slice) is read from memory too.

Elementwise values computed only from constants, coordinates and buffers (masks, filled
tensors) are not stored at all: each consumer recomputes them where it reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from stitch_lsp.compiler.direct_conv import is_direct, mark_direct
from stitch_lsp.compiler.ir import Graph, Node, Shape, Unsupported, Use, numel, strip_ones
from stitch_lsp.models.codegen import GroupKind

Space = Literal["full", "red"]


@dataclass(frozen=True)
class Layout:
    """How a reduction walks its input, after merging neighbouring dims of the same kind.

    row:  (K, R)       reduce the contiguous tail; one block per row.
    tile: (K1, R, K2)  reduce a middle (or leading) dim; threads along K2 keep loads coalesced.
    chan: (R1, K, R2)  reduce all but one middle dim (batch norm); one block per channel.
    """

    kind: Literal["row", "tile", "chan"]
    dims: tuple[int, int, int]
    shape: Shape
    axes: tuple[int, ...]

    @property
    def kept(self) -> int:
        a, b, c = self.dims
        return {"row": a, "tile": a * c, "chan": b}[self.kind]

    @property
    def rlen(self) -> int:
        a, b, c = self.dims
        return {"row": b, "tile": b, "chan": a * c}[self.kind]

    @property
    def keep_shape(self) -> Shape:
        return tuple(1 if i in self.axes else d for i, d in enumerate(self.shape))

    def same(self, other: Layout) -> bool:
        return self.kind == other.kind and self.dims == other.dims

    def describe(self) -> str:
        a, b, c = self.dims
        return {
            "row": f"row {a}x{b}",
            "tile": f"tile {a}x[{b}]x{c}",
            "chan": f"channel [{a}]x{b}x[{c}]",
        }[self.kind]


def layout_of(shape: Shape, axes: tuple[int, ...]) -> Layout:
    runs: list[list[int]] = []  # [size, reduced]
    for i, d in enumerate(shape):
        if d == 1:
            continue
        red = int(i in axes)
        if runs and runs[-1][1] == red:
            runs[-1][0] *= d
        else:
            runs.append([d, red])
    pattern = "".join("R" if r else "K" for _, r in runs)
    sizes = [s for s, _ in runs]
    if pattern == "R":
        return Layout("row", (1, sizes[0], 1), shape, axes)
    if pattern == "KR":
        return Layout("row", (sizes[0], sizes[1], 1), shape, axes)
    if pattern == "RK":
        return Layout("tile", (1, sizes[0], sizes[1]), shape, axes)
    if pattern == "KRK":
        return Layout("tile", (sizes[0], sizes[1], sizes[2]), shape, axes)
    if pattern == "RKR":
        return Layout("chan", (sizes[0], sizes[1], sizes[2]), shape, axes)
    if pattern in ("", "K"):
        raise Unsupported(f"reduction over size-1 dims {axes} of {shape}")
    raise Unsupported(f"reduction over dims {axes} of {shape} is not supported")


@dataclass
class Group:
    gid: int
    kind: GroupKind
    nodes: list[Node] = field(default_factory=list)
    full_numel: int = 0
    layout: Layout | None = None
    space: dict[int, Space] = field(default_factory=dict)
    level: dict[int, int] = field(default_factory=dict)
    outputs: list[int] = field(default_factory=list)
    sinks: list[Node] = field(default_factory=list)
    # pointwise kernels launched as one grid, each its own branch (stages.combine_pointwise)
    parts: list[Group] = field(default_factory=list)

    @property
    def name(self) -> str:
        prefix = {
            "pointwise": "fused",
            "reduction": "fused",
            "gemm": "gemm",
            "conv": "conv",
            "scan": "scan",
            "attention": "attn",
            "aten": "aten",
        }
        if self.kind == "rnn":
            return f"stitch_{self.nodes[0].fn}_{self.gid}"
        if self.kind in ("pointwise", "reduction"):
            return "_".join(["stitch_fused", *_name_parts(self)[:4], str(self.gid)])
        return f"stitch_{prefix[self.kind]}_{self.gid}"

    @property
    def passes(self) -> int:
        return max((self.level[n.vid] for n in self.nodes if n.kind == "reduce"), default=0)

    @property
    def stored_buffers(self) -> set[int]:
        """The buffers this kernel's index stores write (a KV cache), at positions of their own."""
        return {s.uses[2].vid for s in self.sinks if s.kind == "index_store"}

    def owns(self, vid: int) -> bool:
        return vid in self.space or any(n.vid == vid for n in self.nodes)


# Arithmetic that a normalisation or softmax is made of: left out of a reduction kernel's name.
_PLAIN_MATH = {"add", "sub", "mul", "div", "rsqrt", "sqrt", "exp", "log", "identity", "square"}
_REDUCE_NAMES = {"moments": "norm", "softmax": "softmax", "argmax": "argmax", "argmin": "argmin"}


def _name_parts(g: Group) -> list[str]:
    """What a fused kernel's name says it does, as Inductor names them: stitch_fused_norm_relu_1."""
    parts: list[str] = []
    for n in g.nodes:
        if n.kind == "reduce":
            parts.append(_REDUCE_NAMES.get(n.fn, n.fn))
            if n.fn == "moments" and g.sinks:
                parts[-1] = "batch_norm"
        elif n.fn == "lse_finish":
            parts = [p for p in parts if p != "softmax"] + ["logsumexp"]
        elif n.fn != "identity" and (g.kind == "pointwise" or n.fn not in _PLAIN_MATH):
            parts.append(n.fn)
    parts += [s.fn for s in g.sinks if s.kind == "index_store"]
    return list(dict.fromkeys(parts))


def _red_fits(u: Use, node_shape: Shape, layout: Layout) -> bool:
    """A reduced value may be broadcast into the full space only along the reduced axes."""
    keep = layout.keep_shape
    us = tuple(u.shape)
    if len(us) > len(keep):
        us = strip_ones(us)
    us = (1,) * (len(keep) - len(us)) + us
    return us == keep and strip_ones(node_shape) == strip_ones(layout.shape)


def recomputed(graph: Graph) -> set[int]:
    """Elementwise values made only of constants, coordinates, buffers and other such values:
    each consumer recomputes them where it reads them, so they are never stored. A value that a
    library call, a scan, a pooling window or the caller reads is stored as usual."""
    out = set()
    for n in graph.nodes:
        if n.kind != "ew" or n.dtype == "int64":
            continue
        ok = True
        for a in n.args:
            if not isinstance(a, Use):
                continue
            leaf = graph.leaves.get(a.vid)
            if a.vid in out or (leaf is not None and leaf.kind == "buffer"):
                continue
            ok = False
        if ok:
            out.add(n.vid)
    out |= _read_by_cat_only(graph)
    for n in graph.nodes:
        if n.kind not in ("ew", "reduce", "gather"):
            for u in n.uses:
                out.discard(u.vid)
    for u in graph.outputs:
        out.discard(u.vid)
    return out


def _read_by_cat_only(graph: Graph) -> set[int]:
    """Elementwise values that only concatenations read (rotate_half's `-x2` in a rotary
    embedding): the cat's kernel computes each at the element it copies, from the stored
    operands, instead of a kernel of their own writing them out first."""
    readers: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for u in n.uses:
            readers.setdefault(u.vid, []).append(n)
    found = set()
    for n in graph.nodes:
        if n.kind != "ew" or n.dtype == "int64" or n.params.get("effect"):
            continue
        mine = readers.get(n.vid, [])
        if mine and all(r.kind == "gather" and r.fn == "cat" for r in mine):
            found.add(n.vid)
    return found


def _try_add(g: Group, node: Node) -> bool:
    internal = [u for u in node.uses if u.vid in g.space]
    if any(u.strided or u.trans for u in internal):
        return False  # read at other positions than the group's own index: from memory
    stored = g.stored_buffers
    if stored and node.kind == "reduce":
        return False  # the store is a pointwise kernel's
    if any(u.vid in stored for u in node.uses):
        return False  # reads a buffer the group writes at other positions
    if node.kind == "reduce":
        x = node.args[0]
        assert isinstance(x, Use)
        axes: tuple[int, ...] = tuple(node.params["axes"])  # type: ignore[arg-type]
        lay = layout_of(x.shape, axes)
        if x.vid in g.space and g.space[x.vid] != "full":
            return False
        if g.nodes and numel(x.shape) != g.full_numel:
            return False
        if g.layout is not None and not g.layout.same(lay):
            return False
        if not g.nodes:
            g.full_numel = numel(x.shape)
        g.layout = g.layout or lay
        g.kind = "reduction"
        g.level[node.vid] = g.level.get(x.vid, 0) + 1
        g.space[node.vid] = "red"
        g.nodes.append(node)
        return True
    if node.kind in ("pool", "gather") or is_direct(node):
        # A window gathers from memory: its input must be materialised, not a group value.
        if internal or g.layout is not None:
            return False
        if g.nodes and numel(node.shape) != g.full_numel:
            return False
        if not g.nodes:
            g.full_numel = numel(node.shape)
        g.space[node.vid] = "full"
        g.level[node.vid] = 0
        g.nodes.append(node)
        return True
    if node.kind != "ew":
        return False
    if node.params.get("stored_by_index") and g.layout is not None:
        return False  # an index_store is emitted by pointwise kernels only
    fulls = [u for u in internal if g.space[u.vid] == "full"]
    reds = [u for u in internal if g.space[u.vid] == "red"]
    size = numel(node.shape)
    if not g.nodes:
        g.full_numel = size
        space: Space = "full"
    elif fulls:
        if size != g.full_numel:
            return False
        if reds and (g.layout is None or not all(_red_fits(u, node.shape, g.layout) for u in reds)):
            return False
        space = "full"
    elif reds:
        assert g.layout is not None
        if size == g.full_numel and all(_red_fits(u, node.shape, g.layout) for u in reds):
            space = "full"
        elif size == g.layout.kept:
            space = "red"
        else:
            return False
    elif size == g.full_numel:
        space = "full"
    else:
        return False
    g.space[node.vid] = space
    g.level[node.vid] = max((g.level.get(u.vid, 0) for u in internal), default=0)
    g.nodes.append(node)
    return True


# Nodes an elementwise op may be moved past: none of them writes memory that the op could read.
_PURE_KINDS = frozenset({"ew", "reduce", "pool", "gather", "scan", "gemm", "conv", "attn"})


def sink_pointwise(graph: Graph) -> None:
    """Move each elementwise op that one fusible op alone reads down to just before that
    reader, past GEMMs and other kernels it does not feed: `silu(gate(x)) * up(x)` then runs
    the SiLU in the product's kernel instead of a kernel of its own between the two GEMMs."""
    nodes = graph.nodes
    out_vids = {u.vid for u in graph.outputs}
    readers: dict[int, set[int]] = {}
    impure = [0]  # impure[i]: nodes before i that may write memory
    for i, m in enumerate(nodes):
        for u in m.uses:
            readers.setdefault(u.vid, set()).add(i)
        impure.append(impure[-1] + (m.kind not in _PURE_KINDS))
    gemm_out = {m.vid for m in nodes if m.kind == "gemm"}
    before: dict[int, list[int]] = {}  # reader index -> the ops moved to just before it
    for i, n in enumerate(nodes):
        mine = readers.get(n.vid, set())
        if n.kind != "ew" or n.vid in out_vids or n.params.get("effect") or len(mine) != 1:
            continue  # a value several ops read (rotary tables) stays where it was made
        if n.fn == "add" and any(u.vid in gemm_out for u in n.uses):
            continue  # a GEMM's bias: its place is the GEMM's epilogue (fold_gemm_epilogues)
        (r,) = mine
        if nodes[r].kind in ("ew", "reduce") and r > i + 1 and impure[r] == impure[i + 1]:
            before.setdefault(r, []).append(i)
    moved = {i for ops in before.values() for i in ops}
    order: list[Node] = []

    def emit(i: int) -> None:
        for j in before.get(i, []):
            emit(j)
        order.append(nodes[i])

    for i in range(len(nodes)):
        if i not in moved:
            emit(i)
    graph.nodes = order


def partition(graph: Graph) -> list[Group]:
    groups: list[Group] = []
    open_group: Group | None = None
    sink_pointwise(graph)
    mark_direct(graph)
    inline = recomputed(graph)
    graph.recomputed = inline

    def new_group(
        kind: GroupKind,
    ) -> Group:
        g = Group(len(groups), kind)
        groups.append(g)
        return g

    rnn_groups: dict[int, Group] = {}
    for node in graph.nodes:
        if node.vid in inline:
            continue
        if node.kind in ("gemm", "conv", "rnn", "scan", "attn") and not is_direct(node):
            g = new_group("attention" if node.kind == "attn" else node.kind)
            g.nodes.append(node)
            open_group = None
            if node.kind == "rnn":
                rnn_groups[node.vid] = g
            continue
        if node.kind == "aten":  # PyTorch calls in a row are one stage of the program
            if not groups or groups[-1].kind != "aten" or open_group is not None:
                new_group("aten")
            groups[-1].nodes.append(node)
            open_group = None
            continue
        if node.kind == "rnn_out":  # h_n, c_n, a time step: written by the recurrent launcher
            rnn_groups[node.uses[0].vid].nodes.append(node)
            continue
        if node.kind == "bn_update":
            mean = node.args[0]
            assert isinstance(mean, Use)
            if open_group is None or open_group.space.get(mean.vid) != "red":
                raise Unsupported(f"{node.origin}: running-stat update outside its reduction")
            open_group.sinks.append(node)
            continue
        if node.kind == "index_store":
            value = node.args[0]
            assert isinstance(value, Use)
            if (
                open_group is None
                or open_group.kind != "pointwise"
                or not open_group.owns(value.vid)
            ):
                raise Unsupported(f"{node.origin}: internal: an index store away from its value")
            open_group.sinks.append(node)
            continue
        if open_group is not None and _try_add(open_group, node):
            continue
        open_group = new_group("pointwise")
        if not _try_add(open_group, node):
            raise Unsupported(f"{node.origin}: cannot start a fusion group here")

    owner = {n.vid: g for g in groups for n in g.nodes}
    needed: dict[int, set[int]] = {g.gid: set() for g in groups}
    for g in groups:
        for n in g.nodes + g.sinks:
            for u in reads(graph, n, inline):
                src = owner.get(u.vid)
                if src is not None and src is not g:
                    needed[src.gid].add(u.vid)
    for u in graph.outputs:
        src = owner.get(u.vid)
        if src is not None:
            needed[src.gid].add(u.vid)
    for g in groups:
        g.outputs = [n.vid for n in g.nodes if n.vid in needed[g.gid]]
        if g.kind in ("pointwise", "reduction") and not g.outputs and not g.sinks:
            raise Unsupported(f"group {g.gid} computes nothing that is used")
    return groups


def reads(graph: Graph, n: Node, inline: set[int]) -> list[Use]:
    """The stored values a node reads, through the recomputed values it inlines."""
    out: list[Use] = []
    for u in n.uses:
        if u.vid in inline:
            src = graph.node(u.vid)
            assert src is not None
            out += reads(graph, src, inline)
        else:
            out.append(u)
    return out


def _stored(graph: Graph, vid: int) -> str:
    leaf = graph.leaves.get(vid)
    if leaf is not None:
        return leaf.dtype
    node = graph.node(vid)
    return "float32" if node is None or node.dtype == "bool" else node.dtype


# Activations cuBLASLt applies after the bias, by the GEMM's type. Its GELU is the tanh form
# (PyTorch's _addmm_activation relies on the same); in float32 our kernel computes it instead,
# since the epilogue's own tanh is not documented to float32 accuracy.
_LT_ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "float32": ("relu",),
    "bfloat16": ("relu", "gelu_tanh"),
    "float16": ("relu", "gelu_tanh"),
}


def fold_gemm_epilogues(graph: Graph, groups: list[Group]) -> list[Group]:
    """Move a Linear's bias (and a ReLU, or in bf16/fp16 a tanh GELU, right after it) into the
    cuBLASLt GEMM epilogue.

    The add becomes an identity read of the GEMM output when other ops follow it; a group that
    was only `bias` or `bias, relu` disappears, and the GEMM writes that group's value.
    """
    owner = {n.vid: g for g in groups for n in g.nodes}
    out_vids = {u.vid for u in graph.outputs}
    removed: set[int] = set()
    for g in groups:
        if g.kind != "gemm":
            continue
        mm = g.nodes[0]
        if mm.params.get("batch", 1) != 1 or len(mm.args) != 2:
            continue
        if any(u.strided for u in mm.uses):
            continue  # cuBLASLt's heuristics assume aligned, whole operands
        dtype = mm.dtype
        if dtype not in ("float32", "bfloat16", "float16"):
            continue
        if any(_stored(graph, u.vid) != dtype for u in mm.uses):
            continue  # one type for A, B, C and the bias, as the epilogue plans take it
        users = [n for n in graph.nodes if any(u.vid == mm.vid for u in n.uses)]
        if len(users) != 1 or mm.vid in out_vids:
            continue
        add = users[0]
        if add.kind != "ew" or add.fn != "add" or len(add.uses) != 2:
            continue
        mine = [u for u in add.uses if u.vid == mm.vid]
        other = [u for u in add.uses if u.vid != mm.vid]
        n_out = mm.shape[-1]
        if len(mine) != 1 or len(other) != 1 or other[0].strided or other[0].trans:
            continue
        if other[0].vid not in graph.leaves:
            # a bias computed once from parameters (gemms_sharing_an_input's concatenation):
            # the epilogue reads it where its kernel stores it, which must run before the GEMM
            src = owner.get(other[0].vid)
            if src is None or other[0].vid not in src.outputs:
                continue
            if groups.index(src) > groups.index(g):
                continue
        if _stored(graph, other[0].vid) != dtype or add.dtype != dtype:
            continue  # a bias of another type (or a result cast after the add) stays apart
        if strip_ones(other[0].shape) != (n_out,) or numel(add.shape) != numel(mm.shape):
            continue
        if add.shape[-1] != n_out:
            continue
        mm.args.append(Use(other[0].vid, (n_out,)))
        mm.params["epilogue"] = "bias"
        add.fn, add.args = "identity", [mine[0]]
        tail = owner.get(add.vid)
        if tail is None or tail.kind != "pointwise":
            continue
        act = tail.nodes[1] if len(tail.nodes) == 2 else None
        if len(tail.nodes) == 1 and tail.outputs == [add.vid]:
            keep = add
        elif (
            act is not None
            and act.fn in _LT_ACTIVATIONS.get(dtype, ())
            and [u.vid for u in act.uses] == [add.vid]
            and tail.outputs == [act.vid]
        ):
            keep = act
            mm.params["epilogue"] = f"{act.fn.removesuffix('_tanh')}_bias"
        else:
            continue
        # The GEMM now produces the tail's value itself.
        graph.nodes = [n for n in graph.nodes if n not in tail.nodes]
        mm.vid = keep.vid
        g.outputs = [keep.vid]
        removed.add(tail.gid)
    return [g for g in groups if g.gid not in removed]
