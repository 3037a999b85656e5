"""Channels-last convolutions: a permute around a convolution becomes the storage order.

ConvNeXt, `LayerNorm2d` and their kin permute NCHW activations to NHWC for a LayerNorm or a
Linear and back before the next convolution. Stored as written, each permute is paid as a
strided pass: a norm whose loads stride by H*W, an elementwise op that reads a GEMM's output
transposed, a copy before the convolution. Two moves take the permutes out:

- a 2-D convolution whose input is an NHWC storage read as NCHW runs channels-last: cuDNN takes
  the NHWC tensor as it lies and writes NHWC (`channels_last` in the node's params);
- an elementwise op whose full-size operands all read their storage through one permutation is
  computed in that storage's order instead, and its readers read it through the permutation.

Both run only in a model that reads a convolution's NCHW output as NHWC somewhere (the sign that
it works channels-last); there every 2-D convolution goes channels-last (with one transposing
copy of an input that is not NHWC yet), then elementwise ops follow in graph order, each only
where it makes no more strided reads than it removes. So the layout flows from convolution to
convolution, and a transposing pass stays only where a reader needs the other order (a GEMM's
rows, a pool), as before. Every reader is re-expressed
in the new storage before anything moves; where one cannot be (a reshape that strides cannot
express, a reader that needs a plain input), nothing changes. The values are the same element
for element; only where they lie differs. Torch-free.
"""

from __future__ import annotations

import math

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Graph, Node, Operand, Shape, Use
from stitch_lsp.compiler.rewrites.surgery import redirect as _redirect

# The permutations that read an NHWC storage as NCHW and the reverse: use.shape[i] = T[P[i]].
_NHWC_AS_NCHW = (0, 3, 1, 2)
_NCHW_AS_NHWC = (0, 2, 3, 1)
# Readers whose kernels fold any strided use into their index math.
_STRIDED_READERS = ("ew", "reduce")


def permutation_of(u: Use, storage: int) -> tuple[tuple[int, ...], Shape] | None:
    """(P, T) where `u` reads a whole contiguous storage of shape T through a permutation:
    u.shape[i] = T[P[i]] (size-1 dims stay where they are). None for a plain read, a slice,
    a broadcast or any strides that are not a permutation of contiguous ones."""
    if not (u.strided or u.trans) or u.offset != 0 or math.prod(u.shape) != storage:
        return None
    st = layout.strides_of(u)
    dims = [i for i, d in enumerate(u.shape) if d != 1]
    order = sorted(dims, key=lambda i: -st[i])
    expect = 1
    for i in reversed(order):
        if st[i] != expect:
            return None
        expect *= u.shape[i]
    if order == dims:
        return None  # the natural order: a plain read in disguise
    perm = list(range(len(u.shape)))
    for slot, i in zip(dims, order, strict=True):
        perm[i] = slot
    target = [1] * len(u.shape)
    for i, p in enumerate(perm):
        target[p] = u.shape[i]
    return tuple(perm), tuple(target)


def _storage_of(graph: Graph, vid: int) -> int:
    return math.prod(graph.shape_of(vid))


def moved_use(u: Use, old: Shape, new_vid: int, new_strides: tuple[int, ...]) -> Use | None:
    """`u`, a read of a contiguous storage of shape `old`, as a read of value `new_vid`, where
    dim i of `old` lies at stride new_strides[i]. None where strides cannot say it."""
    if not old:
        return Use(new_vid, u.shape, u.trans, u.strides, u.offset)
    base = layout.make(Use(new_vid, old), old, new_strides, 0)
    return layout.compose(u, base, math.prod(old))


def _in_order(a: Operand, rank: int, inverse: tuple[int, ...], storage: int) -> Operand:
    """An elementwise operand re-read in its consumer's storage order."""
    if not isinstance(a, Use):
        return a
    lead = rank - len(a.shape)
    shape = (1,) * lead + tuple(a.shape)
    st = (0,) * lead + layout.strides_of(a)
    u = Use(
        a.vid,
        tuple(shape[j] for j in inverse),
        strides=tuple(st[j] for j in inverse),
        offset=a.offset,
    )
    return layout.broadcast_view(layout.canonical(u, storage), storage)


class _Readers:
    """Every read of a value, re-expressed for a new storage before anything is changed."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def plan(
        self, vid: int, old: Shape, new_vid: int, new_strides: tuple[int, ...]
    ) -> tuple[dict[tuple[int, int], Use], int] | None:
        """((reader vid, arg position) -> its new use, strided reads removed less those made),
        or None where a reader cannot take its new use."""
        changes: dict[tuple[int, int], Use] = {}
        score = 0
        if any(u.vid == vid for u in self.graph.outputs):
            return None  # a returned value keeps its layout
        for n in self.graph.nodes:
            for i, a in enumerate(n.args):
                if not isinstance(a, Use) or a.vid != vid:
                    continue
                m = moved_use(a, old, new_vid, new_strides)
                if m is None:
                    return None
                plain, was_plain = not (m.strided or m.trans), not (a.strided or a.trans)
                conv = _conv_takes(n, i, m, math.prod(old))
                if n.kind not in _STRIDED_READERS and not plain and not conv:
                    return None
                if n.kind == "reduce" and was_plain and not plain:
                    return None  # a reduction that reads in order keeps doing so
                score += int(plain and not was_plain) - int(was_plain and not plain and not conv)
                changes[(n.vid, i)] = m
        return changes, score

    def apply(self, changes: dict[tuple[int, int], Use]) -> None:
        for n in self.graph.nodes:
            for i in range(len(n.args)):
                if (n.vid, i) in changes:
                    n.args[i] = changes[(n.vid, i)]


def _conv_takes(n: Node, i: int, u: Use, storage: int) -> bool:
    """A 2-D convolution's input that becomes an NHWC storage read as NCHW: it can run
    channels-last (done right after, in `_convert`)."""
    if n.kind != "conv" or n.fn != "conv2d" or i != 0 or n.params.get("channels_last"):
        return False
    found = permutation_of(u, storage)
    return found is not None and found[0] == _NHWC_AS_NCHW


def _convert(
    graph: Graph,
    old: Node,
    new: Node,
    perm: tuple[int, ...],
    made: list[Node],
    gain: int | None = None,
) -> bool:
    """Replace `old` (stored as old.shape) with `new` (stored as new.shape, dim i of old at
    new's dim perm[i]), its readers re-expressed. Nothing changes where a reader cannot be, or,
    given the strided reads `new` itself removes (`gain`), where more are made than removed."""
    cs = layout.contiguous_strides(new.shape)
    strides = tuple(cs[perm[i]] for i in range(len(old.shape)))
    readers = _Readers(graph)
    planned = readers.plan(old.vid, old.shape, new.vid, strides)
    if planned is None or (gain is not None and gain + planned[1] < 0):
        return False
    changes = planned[0]
    graph.nodes[graph.nodes.index(old)] = new
    readers.apply(changes)
    for n in list(graph.nodes):  # convolutions that now read NHWC as NCHW
        if n.kind == "conv" and (n.vid, 0) in changes and not _to_channels_last(graph, n, made):
            _materialise_input(graph, n)
    return True


def _copy(graph: Graph, u: Use, like: Node) -> Node:
    """An elementwise identity that stores `u` contiguously (a transposing copy)."""
    return Node(
        graph.new_id(),
        "ew",
        "identity",
        [u],
        tuple(u.shape),
        {"dtype": _dtype_of(graph, u.vid)},
        like.origin,
        like.line,
    )


def _materialise_input(graph: Graph, conv: Node) -> None:
    """A convolution whose readers keep it NCHW: its input is copied to NCHW first, as a copy
    before it did until now."""
    x = conv.args[0]
    assert isinstance(x, Use)
    copy = _copy(graph, x, conv)
    graph.nodes.insert(graph.nodes.index(conv), copy)
    conv.args[0] = Use(copy.vid, copy.shape)


def _to_channels_last(graph: Graph, conv: Node, made: list[Node], copy: bool = False) -> bool:
    """`conv` channels-last: its input as NHWC (copied there first when `copy` and it is not),
    its output stored NHWC and read through the permutation."""
    x, w = conv.args[0], conv.args[1]
    if not isinstance(x, Use) or conv.fn != "conv2d" or conv.params.get("channels_last"):
        return False
    if len(x.shape) != 4 or len(conv.shape) != 4:
        return False
    found = permutation_of(x, _storage_of(graph, x.vid))
    first: list[Node] = []
    if found is not None and found[0] == _NHWC_AS_NCHW:
        source = Use(x.vid, found[1])
    elif copy:
        first = [_copy(graph, layout.permute(x, _NCHW_AS_NHWC), conv)]
        source = Use(first[0].vid, first[0].shape)
    else:
        return False
    n, c, h, wd = conv.shape
    new = Node(
        graph.new_id(),
        "conv",
        conv.fn,
        [source, w, *conv.args[2:]],
        (n, h, wd, c),
        {**conv.params, "channels_last": True},
        conv.origin,
        conv.line,
    )
    if not _convert(graph, conv, new, _NHWC_AS_NCHW, made):
        return False
    at = graph.nodes.index(new)
    graph.nodes[at:at] = first
    made += [*first, new]
    return True


def _in_storage_order(graph: Graph, n: Node, made: list[Node]) -> bool:
    """An elementwise node whose full-size operands all read one permutation of their storage,
    computed in that storage's order, where that removes at least as many strided reads as it
    makes."""
    found: tuple[tuple[int, ...], Shape] | None = None
    gain = 0
    for a in n.args:
        if not isinstance(a, Use) or math.prod(a.shape) != math.prod(n.shape) or not n.shape:
            continue
        if len(a.shape) != len(n.shape):
            return False
        mine = permutation_of(a, _storage_of(graph, a.vid))
        if mine is None or (found is not None and mine[0] != found[0]):
            return False
        found = mine
        gain += 1
    if found is None:
        return False
    perm, target = found
    inverse = tuple(perm.index(j) for j in range(len(perm)))
    args = [
        _in_order(a, len(n.shape), inverse, _storage_of(graph, a.vid)) if isinstance(a, Use) else a
        for a in n.args
    ]
    new = Node(graph.new_id(), n.kind, n.fn, args, target, dict(n.params), n.origin, n.line)
    if not _convert(graph, n, new, perm, made, gain):
        return False
    made.append(new)
    return True


def _dtype_of(graph: Graph, vid: int) -> str:
    if vid in graph.leaves:
        return graph.leaves[vid].dtype
    node = graph.node(vid)
    return node.dtype if node is not None else ""


def _drop_copy(graph: Graph, n: Node) -> bool:
    """An identity whose operand is now a plain read of a computed value of its own type and
    size: its readers read that value."""
    if n.kind != "ew" or n.fn != "identity" or len(n.args) != 1:
        return False
    a = n.args[0]
    if not isinstance(a, Use) or a.strided or a.trans or a.vid in graph.leaves:
        return False
    if _storage_of(graph, a.vid) != math.prod(n.shape) or _dtype_of(graph, a.vid) != n.dtype:
        return False
    if any(u.vid == n.vid for u in graph.outputs):
        return False
    _redirect(graph, n.vid, a.vid)
    graph.nodes.remove(n)
    return True


def works_channels_last(graph: Graph) -> bool:
    """Whether something reads a stored 4-D value (NCHW) as NHWC."""
    return any(_reads_as_nhwc(graph, a) for n in graph.nodes for a in n.uses)


HALF_CNN_ENV = "STITCH_CHANNELS_LAST_HALF"


def half_precision_cnn(graph: Graph) -> bool:
    """A bf16/fp16 network of 2-D convolutions, where cuDNN's tensor-core kernels work NHWC and
    an NCHW convolution pays a transpose in and out (`nchwToNhwcKernel`), as Inductor's layout
    optimisation assumes. Off unless STITCH_CHANNELS_LAST_HALF=1: not yet timed on a GPU."""
    import os

    if os.environ.get(HALF_CNN_ENV, "").strip() != "1":
        return False
    convs = [n for n in graph.nodes if n.kind == "conv" and n.fn == "conv2d"]
    return len(convs) >= 2 and all(n.dtype in ("bfloat16", "float16") for n in convs)


def _reads_as_nhwc(graph: Graph, a: Use) -> bool:
    if len(a.shape) != 4 or a.vid in graph.leaves:
        return False
    found = permutation_of(a, _storage_of(graph, a.vid))
    return found is not None and found[0] == _NCHW_AS_NHWC


def _flows_to_nhwc(graph: Graph, vid: int, depth: int = 4) -> bool:
    """Whether `vid`, directly or through elementwise ops that read it in order, is read as
    NHWC: then an NHWC convolution output saves that transposing read."""
    for n in graph.nodes:
        for a in n.uses:
            if a.vid != vid:
                continue
            if _reads_as_nhwc(graph, a):
                return True
            plain = not (a.strided or a.trans)
            if depth and plain and n.kind == "ew" and _flows_to_nhwc(graph, n.vid, depth - 1):
                return True
    return False


def channels_last(graph: Graph) -> list[Node]:
    """The moves in graph order; the nodes made (the rewrite records the convolutions).

    First the copies (an identity of a permuted read is stored in its source's order, so a
    convolution it feeds reads NHWC as it lies), then the convolutions (with a copy of the
    input only where the output is read as NHWC further on), then the other elementwise ops."""
    half = half_precision_cnn(graph)
    if not (works_channels_last(graph) or half):
        return []
    made: list[Node] = []
    copies = {n.vid for n in graph.nodes if n.kind == "ew" and n.fn == "identity"}
    for n in list(graph.nodes):
        if n in graph.nodes and n.vid in copies:
            _in_storage_order(graph, n, made)
    copies |= {n.vid for n in made if n.kind == "ew" and n.fn == "identity"}
    _drop_copies(graph, copies, made)
    for n in [m for m in graph.nodes if m.kind == "conv"]:
        if n in graph.nodes:
            wanted = half or _flows_to_nhwc(graph, n.vid)
            _to_channels_last(graph, n, made, copy=wanted)
    for n in list(graph.nodes):
        if n in graph.nodes and n.kind == "ew":
            _in_storage_order(graph, n, made)
    copies |= {n.vid for n in made if n.kind == "ew" and n.fn == "identity"}
    _drop_copies(graph, copies, made)
    return made


def _drop_copies(graph: Graph, copies: set[int], made: list[Node]) -> None:
    for n in list(graph.nodes):
        if n.vid in copies and n in graph.nodes and _drop_copy(graph, n) and n in made:
            made.remove(n)
