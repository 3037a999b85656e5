"""Graph surgery the catalogue's entries share: who reads a value, new nodes placed before
an anchor, reads redirected, sums over ranges, and the record of one application. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Const, Graph, Node, NodeKind, Operand, Shape, Use


def users_of(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for vid in dict.fromkeys(u.vid for u in n.uses):
            out.setdefault(vid, []).append(n)
    return out


def only_user(graph: Graph, vid: int, users: dict[int, list[Node]]) -> Node | None:
    """The one node that reads `vid`, when nothing else (another node, the caller) does."""
    if any(u.vid == vid for u in graph.outputs):
        return None
    readers = users.get(vid, [])
    return readers[0] if len(readers) == 1 else None


def plain_use(u: Operand) -> bool:
    """A use read by the consumer's own flat index (no transpose, strides or offset)."""
    return isinstance(u, Use) and not u.trans and not u.strided


def new_node(
    graph: Graph,
    like: Node,
    kind: NodeKind,
    fn: str,
    args: list[Operand],
    shape: Shape,
    **params: object,
) -> Node:
    """A node with a fresh id that reports `like`'s reference line; not yet placed."""
    return Node(
        graph.new_id(),
        kind,
        fn,
        list(args),
        tuple(shape),
        dict(params),
        like.origin,
        like.line,
    )


def insert_before(graph: Graph, anchor: Node, nodes: list[Node]) -> None:
    at = graph.nodes.index(anchor)
    graph.nodes[at:at] = nodes


def redirect(graph: Graph, old: int, new: int, skip: Node | None = None) -> None:
    """Every read of `old` reads `new` instead (both stored contiguously, same element count)."""

    def moved(a: Operand) -> Operand:
        if isinstance(a, Use) and a.vid == old:
            return Use(new, a.shape, a.trans, a.strides, a.offset)
        return a

    for n in graph.nodes:
        if n is not skip:
            n.args = [moved(a) for a in n.args]
    graph.outputs = [moved(u) for u in graph.outputs]  # type: ignore[misc]


def const_arg(n: Node) -> tuple[Use, float, int] | None:
    """(the tensor operand, the constant, the constant's position) of a tensor-number op."""
    if len(n.args) != 2:
        return None
    a, b = n.args
    if isinstance(a, Use) and isinstance(b, Const):
        return a, b.value, 1
    if isinstance(a, Const) and isinstance(b, Use):
        return b, a.value, 0
    return None


def axes_of(n: Node) -> tuple[int, ...]:
    """A reduction's or pool's integer tuple parameter `axes`."""
    return int_param(n, "axes")


def int_param(n: Node, key: str) -> tuple[int, ...]:
    value = n.params.get(key, ())
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else ()


def float_ew(n: Node | None) -> bool:
    return n is not None and n.kind == "ew" and n.dtype == "float32"


@dataclass
class Applied:
    """One application: the entry's name, where it fired (reference ops), the nodes it made."""

    name: str
    site: str
    vids: set[int] = field(default_factory=set)

    def describe(self) -> str:
        return f"{self.name}: {self.site}"


def sum_node(graph: Graph, like: Node, u: Use, axes: tuple[int, ...], keep: Shape) -> Node:
    """A sum of `u` over `axes` (keepdim shape `keep`), or a copy where they all have size 1
    (the kernels do not reduce over size-1 dims)."""
    if all(u.shape[a] == 1 for a in axes):
        return new_node(graph, like, "ew", "identity", [u], keep)
    return new_node(graph, like, "reduce", "sum", [u], keep, axes=axes, field="sum")


def range_sums(
    graph: Graph, like: Node, u: Use, axis: int, ranges: list[tuple[int, int]], made: list[Node]
) -> Use:
    """u summed along `axis` over each [lo, hi) of `ranges` (repeats computed once), stacked
    along that axis in the order given; the nodes made are appended to `made`. A range that
    misses only a few border positions of a long dim is the whole sum less them, so that the
    ranges of a padded dim cost one pass over u, not one each."""
    keep = (*u.shape[:axis], 1, *u.shape[axis + 1 :])
    length = u.shape[axis]
    sums: dict[tuple[int, int], Node] = {}

    def whole() -> Node:
        if (0, length) not in sums:
            sums[(0, length)] = sum_node(graph, like, u, (axis,), keep)
            made.append(sums[(0, length)])
        return sums[(0, length)]

    for lo, hi in dict.fromkeys(ranges):
        if (lo, hi) in sums:
            continue
        left_out = [*range(lo), *range(hi, length)]
        if (lo, hi) == (0, length) or (len(left_out) <= 4 and 4 * len(left_out) <= length):
            last = whole()
            for i in left_out:
                last = new_node(
                    graph,
                    like,
                    "ew",
                    "sub",
                    [Use(last.vid, keep), layout.slice_(u, axis, i, i + 1)],
                    keep,
                )
                made.append(last)
            sums[(lo, hi)] = last
            continue
        sums[(lo, hi)] = sum_node(graph, like, layout.slice_(u, axis, lo, hi), (axis,), keep)
        made.append(sums[(lo, hi)])
    if len(ranges) == 1:
        return Use(sums[ranges[0]].vid, keep)
    stacked = (*u.shape[:axis], len(ranges), *u.shape[axis + 1 :])
    cat = new_node(
        graph,
        like,
        "gather",
        "cat",
        [Use(sums[r].vid, keep) for r in ranges],
        stacked,
        dim=axis,
        sizes=(1,) * len(ranges),
    )
    made.append(cat)
    return Use(cat.vid, stacked)
