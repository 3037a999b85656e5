"""Attention written out by hand, softmax(q k^T c + m) v, as one flash kernel (bf16/fp16).

torchvision's Swin, minGPT-style blocks and older Hugging Face code spell attention as a batched
matmul, a scale, additive terms (a relative position bias, a shifted-window mask), a softmax and
a second matmul. Captured, that is two cuBLAS GEMMs around a fused softmax, and the score matrix
goes through memory three times. Here the chain is recognised in the graph and replaced by the
`attn` node that `F.scaled_dot_product_attention` gets: the scores stay in registers, in fp32,
where eager rounds them to the input type after each step.

What is recognised, read backwards from the second GEMM:
- `gemm(P, v)` where P is `softmax(X, -1)` (the captured max / sum-of-exp / sub / exp / div),
  possibly cast to v's type;
- X reached from `gemm(q, k^T)` through casts, multiplications or divisions by a number (before
  any additive term), additions of tensors (each an additive mask term) and `masked_fill` with
  -inf (a mask term that is -inf where the condition holds);
- every value on the way read by the next step alone, so nothing else sees the scores.

The GEMMs are 3-D (batch dims flattened by the capture), while the additive terms are read over
the model's own batch dims: (windows, heads) for Swin's bias, (images, windows, heads) for its
shift mask. The batch is split into the flash kernel's (batch, head) grid where every operand
walks each part with one stride; terms that do not (or several terms) are first summed into one
tensor, as small as their broadcasting allows.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Const, Graph, Node, Operand, Shape, Use

FLASH_DTYPES = ("bfloat16", "float16")
FLASH_MAX_HEAD = 128  # the kernel's largest head size (builder.FLASH_MAX_HEAD)


@dataclass
class _Site:
    """One written-out attention: its two GEMMs, the scale, the mask terms, the nodes it
    replaces."""

    first: Node  # gemm(q, k^T)
    second: Node  # gemm(P, v)
    scale: float
    terms: list[tuple[Use, Shape]]  # additive terms, as read by their add (and that add's shape)
    bool_terms: list[tuple[Use, Shape]]  # masked_fill conditions (-inf where true)
    dtype: str


def _dtype(graph: Graph, nodes: dict[int, Node], vid: int) -> str:
    if vid in graph.leaves:
        return graph.leaves[vid].dtype
    return nodes[vid].dtype


def _readers(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for vid in dict.fromkeys(u.vid for u in n.uses):
            out.setdefault(vid, []).append(n)
    return out


def _only_reader(graph: Graph, readers: dict[int, list[Node]], vid: int) -> Node | None:
    if any(u.vid == vid for u in graph.outputs):
        return None
    got = readers.get(vid, [])
    return got[0] if len(got) == 1 else None


def _softmax_input(
    graph: Graph, nodes: dict[int, Node], readers: dict[int, list[Node]], p: Use, second: Node
) -> Node | None:
    """The node X where `p` (the second GEMM's left operand) is softmax(X) over its last dim,
    read by that softmax alone; None otherwise."""
    if p.strided or p.trans:
        return None
    div = nodes.get(p.vid)
    if div is not None and div.kind == "ew" and div.fn == "identity" and len(div.args) == 1:
        if _only_reader(graph, readers, div.vid) is not second:
            return None
        inner = div.args[0]
        if not isinstance(inner, Use) or inner.strided or inner.trans:
            return None
        div = nodes.get(inner.vid)
        second = nodes[p.vid]
    if div is None or div.kind != "ew" or div.fn != "div" or len(div.args) != 2:
        return None
    if _only_reader(graph, readers, div.vid) is not second:
        return None
    e_use, s_use = div.args
    if not isinstance(e_use, Use) or not isinstance(s_use, Use):
        return None
    exp, total = nodes.get(e_use.vid), nodes.get(s_use.vid)
    if exp is None or exp.kind != "ew" or exp.fn != "exp" or len(exp.args) != 1:
        return None
    if total is None or total.kind != "reduce" or total.fn != "softmax":
        return None
    if total.params.get("field") != "sumexp" or _only_reader(graph, readers, total.vid) is not div:
        return None
    if _only_reader(graph, readers, exp.vid) is not div:
        return None
    sub_use = exp.args[0]
    sub = nodes.get(sub_use.vid) if isinstance(sub_use, Use) else None
    if sub is None or sub.kind != "ew" or sub.fn != "sub" or len(sub.args) != 2:
        return None
    if _only_reader(graph, readers, sub.vid) is not exp:
        return None
    x_use, m_use = sub.args
    if not isinstance(x_use, Use) or not isinstance(m_use, Use):
        return None
    top = nodes.get(m_use.vid)
    if top is None or top.kind != "reduce" or top.fn != "softmax":
        return None
    if top.params.get("field") != "max" or _only_reader(graph, readers, top.vid) is not sub:
        return None
    x = nodes.get(x_use.vid)
    if x is None:
        return None
    rank = len(x_use.shape)
    for n in (top, total):
        (arg,) = n.uses
        if arg.vid != x.vid or arg.strided or arg.trans or n.params.get("axes") != (rank - 1,):
            return None
    if x_use.strided or x_use.trans:
        return None
    if {r.vid for r in readers.get(x.vid, [])} != {top.vid, total.vid, sub.vid}:
        return None
    if any(u.vid == x.vid for u in graph.outputs):
        return None
    return x


def _number(n: Node) -> tuple[Use, float] | None:
    """(the tensor, the number) of `t * c`, `c * t` or `t / c`."""
    if n.kind != "ew" or len(n.args) != 2 or n.fn not in ("mul", "div"):
        return None
    a, b = n.args
    if isinstance(a, Use) and isinstance(b, Const):
        return (a, b.value) if n.fn == "mul" else (a, 1.0 / b.value) if b.value else None
    if n.fn == "mul" and isinstance(a, Const) and isinstance(b, Use):
        return b, a.value
    return None


def _scores(
    graph: Graph, nodes: dict[int, Node], readers: dict[int, list[Node]], x: Node, lq: int, lk: int
) -> tuple[Node, float, list[tuple[Use, Shape]], list[tuple[Use, Shape]]] | None:
    """Walk from X back to the first GEMM: (that GEMM, the scale, additive terms, -inf terms)."""
    scale = 1.0
    terms: list[tuple[Use, Shape]] = []
    fills: list[tuple[Use, Shape]] = []
    cur = x
    total = math.prod(x.shape)
    for _ in range(16):
        if cur.shape[-2:] != (lq, lk) or math.prod(cur.shape) != total:
            return None
        if cur is not x and _only_reader(graph, readers, cur.vid) is None:
            return None
        if cur.kind == "gemm":
            return (cur, scale, terms, fills) if len(cur.args) == 2 else None
        if cur.kind != "ew":
            return None
        chain: Use | None = None
        scaled = _number(cur)
        if scaled is not None:
            chain, c = scaled
            scale *= c
        elif cur.fn == "identity" and len(cur.args) == 1:
            chain = cur.args[0] if isinstance(cur.args[0], Use) else None
        elif cur.fn == "add" and len(cur.args) == 2 and all(isinstance(a, Use) for a in cur.args):
            a, b = cur.args
            assert isinstance(a, Use) and isinstance(b, Use)
            pick = _chain_operand(nodes, readers, cur, a, b, total)
            if pick is None or scale != 1.0:  # (s + m) c: the term would need the scale too
                return None
            chain, term = pick
            terms.append((term, cur.shape))
        elif cur.fn == "where" and len(cur.args) == 3:
            cond, fill, value = cur.args
            neg_inf = isinstance(fill, Const) and fill.value == -math.inf
            if not (isinstance(cond, Use) and isinstance(value, Use) and neg_inf):
                return None
            if _dtype(graph, nodes, cond.vid) != "bool" or scale < 0:
                return None  # -inf scaled by a positive number stays -inf
            chain = value
            fills.append((cond, cur.shape))
        if chain is None or chain.strided or chain.trans or chain.vid not in nodes:
            return None
        cur = nodes[chain.vid]
    return None


def _chain_operand(
    nodes: dict[int, Node],
    readers: dict[int, list[Node]],
    add: Node,
    a: Use,
    b: Use,
    total: int,
) -> tuple[Use, Use] | None:
    """(the score operand, the term) of an addition on the score chain: the score operand is
    full size, read by this addition alone, and leads back to a GEMM."""
    for chain, term in ((a, b), (b, a)):
        node = nodes.get(chain.vid)
        if node is None or chain.strided or math.prod(chain.shape) != total:
            continue
        if readers.get(chain.vid, []) != [add]:
            continue
        if _leads_to_gemm(nodes, node):
            return chain, term
    return None


def _leads_to_gemm(nodes: dict[int, Node], node: Node) -> bool:
    for _ in range(16):
        if node.kind == "gemm":
            return True
        if node.kind != "ew" or not node.uses:
            return False
        full = [u for u in node.uses if math.prod(u.shape) == math.prod(node.shape)]
        nxt = nodes.get(full[-1].vid) if full else None
        if nxt is None:
            return False
        node = nxt
    return False


# -- batch dims -------------------------------------------------------------------------------


def _refine(shapes: list[Shape], total: int) -> Shape | None:
    """The coarsest batch dims that every shape's batch dims are groups of (None when two
    shapes cut the batch incompatibly, as (6, 4) and (4, 6) do)."""
    cuts = {1, total}
    for shape in shapes:
        acc = 1
        for d in reversed(shape):
            acc *= d
            cuts.add(acc)
    dims: list[int] = []
    prev = 1
    for c in sorted(cuts):
        if c % prev:
            return None
        if c > prev:
            dims.append(c // prev)
        prev = c
    return tuple(reversed(dims))


def _split(strides: tuple[int, ...], coarse: Shape, fine: Shape) -> list[int] | None:
    """Strides over the fine batch dims of an operand read with `strides` over `coarse`."""
    out: list[int] = []
    i = 0
    for d, s in zip(coarse, strides, strict=True):
        if d == 1:
            continue
        group: list[int] = []
        acc = 1
        while acc < d and i < len(fine):
            group.append(fine[i])
            acc *= fine[i]
            i += 1
        if acc != d:
            return None
        inner = 1
        tail: list[int] = []
        for f in reversed(group):
            tail.append(s * inner)
            inner *= f
        out += reversed(tail)
    return out if i == len(fine) else None


def _merge(dims: Shape, strides: list[int]) -> int | None:
    """One stride for `dims` walked as one, or None."""
    real = [(d, s) for d, s in zip(dims, strides, strict=True) if d != 1]
    for (_, s_out), (d_in, s_in) in itertools.pairwise(real):
        if s_out != s_in * d_in:
            return None
    return real[-1][1] if real else 0


def _four(u: Use, coarse: Shape, fine: Shape, tail: Shape, cut: int) -> Use | None:
    """`u` (read over coarse batch dims, then `tail`) as a 4-D (batch, head, *tail) read."""
    st = layout.strides_of(u)
    fs = _split(st[: len(coarse)], coarse, fine)
    if fs is None:
        return None
    sb, sh = _merge(fine[:cut], fs[:cut]), _merge(fine[cut:], fs[cut:])
    if sb is None or sh is None:
        return None
    b, h = math.prod(fine[:cut]), math.prod(fine[cut:])
    return Use(u.vid, (b, h, *tail), strides=(sb, sh, *st[len(coarse) :]), offset=u.offset)


def _four_mask(u: Use, fine: Shape, tail: Shape, cut: int) -> Use | None:
    """The mask as the kernel reads it: like `_four`, but where its batch dims do not walk as
    one, an outer run of them it does not vary along is left to the kernel's period (the mask
    then has fewer batches than the attention, and batch b reads b % that many)."""
    four = _four(u, fine, fine, tail, cut)
    if four is not None:
        return four
    st = layout.strides_of(u)
    fs = list(st[: len(fine)])
    for lead in range(1, cut):
        if any(fs[:lead]):
            break
        sb, sh = _merge(fine[lead:cut], fs[lead:cut]), _merge(fine[cut:], fs[cut:])
        if sb is not None and sh is not None:
            p, h = math.prod(fine[lead:cut]), math.prod(fine[cut:])
            return Use(u.vid, (p, h, *tail), strides=(sb, sh, *st[len(fine) :]), offset=u.offset)
    return None


def _rows(u: Use) -> Use | None:
    """A GEMM operand (*batch, rows, cols) without `trans`, by strides."""
    if len(u.shape) < 3:
        return None
    if u.trans:
        if u.strided:
            return None
        st = list(layout.contiguous_strides((*u.shape[:-2], u.shape[-1], u.shape[-2])))
        st[-2], st[-1] = st[-1], st[-2]
        return Use(u.vid, u.shape, strides=tuple(st))
    return u


def _through_copy(graph: Graph, nodes: dict[int, Node], u: Use) -> Use:
    """A plain read of a `.contiguous()` copy (matmul's expand-and-clone of a transposed or
    sliced q, k or v) as the read that copy made, with the model's own batch dims: the kernel
    takes strides, and the copy, read by nothing else, is pruned."""
    node = nodes.get(u.vid)
    if node is None or node.kind != "ew" or node.fn != "identity" or len(node.args) != 1:
        return u
    src = node.args[0]
    if not isinstance(src, Use) or src.trans or u.trans or u.strided:
        return u
    if _dtype(graph, nodes, src.vid) != node.dtype:
        return u  # a cast, not a copy
    if tuple(src.shape) != tuple(node.shape) or tuple(u.shape[-2:]) != tuple(node.shape[-2:]):
        return u
    return src if len(src.shape) >= 3 else u


def _swap(u: Use) -> Use:
    """The last two dims exchanged, by strides."""
    st = list(layout.strides_of(u))
    st[-2], st[-1] = st[-1], st[-2]
    return Use(u.vid, (*u.shape[:-2], u.shape[-1], u.shape[-2]), strides=tuple(st), offset=u.offset)


# -- the rewrite ------------------------------------------------------------------------------


def _match(
    graph: Graph, nodes: dict[int, Node], readers: dict[int, list[Node]], second: Node
) -> _Site | None:
    if second.kind != "gemm" or len(second.args) != 2 or second.dtype not in FLASH_DTYPES:
        return None
    p, v = second.args
    if not isinstance(p, Use) or not isinstance(v, Use) or len(p.shape) != 3:
        return None
    x = _softmax_input(graph, nodes, readers, p, second)
    if x is None:
        return None
    _, lq, lk = p.shape
    walked = _scores(graph, nodes, readers, x, lq, lk)
    if walked is None:
        return None
    first, scale, terms, fills = walked
    if first is not x and _only_reader(graph, readers, first.vid) is None:
        return None
    q, kt = first.args
    if not isinstance(q, Use) or not isinstance(kt, Use) or len(q.shape) != 3:
        return None
    if q.shape[0] != p.shape[0] or v.shape[0] != p.shape[0] or len(v.shape) != 3:
        return None
    dtypes = {_dtype(graph, nodes, u.vid) for u in (q, kt, v)} | {first.dtype, second.dtype}
    if len(dtypes) != 1:
        return None
    return _Site(first, second, scale, terms, fills, dtypes.pop())


def _apply(graph: Graph, nodes: dict[int, Node], site: _Site) -> Node | None:
    """Place the attn node (and what its mask needs) before the second GEMM and move every
    read of that GEMM to it; None where the operands do not suit the kernel."""
    q, kt = site.first.args
    p, v = site.second.args
    assert isinstance(q, Use) and isinstance(kt, Use) and isinstance(p, Use) and isinstance(v, Use)
    bt = p.shape[0]
    q, kt, v = (_through_copy(graph, nodes, u) for u in (q, kt, v))
    qr, kr, vr = _rows(q), _rows(kt), _rows(v)
    if qr is None or kr is None or vr is None:
        return None
    k = _swap(kr)  # (*batch, keys, head dim)
    lq, e = qr.shape[-2:]
    lk, ev = k.shape[-2], vr.shape[-1]
    if e % 16 or ev % 16 or e > FLASH_MAX_HEAD or ev > FLASH_MAX_HEAD or k.shape[-1] != e:
        return None
    if any(layout.strides_of(u)[-1] != 1 for u in (qr, k, vr)):
        return None
    if any(s < 0 for u in (qr, k, vr) for s in layout.strides_of(u)):
        return None
    batch_shapes = [s[:-2] for _, s in site.terms + site.bool_terms]
    batch_shapes += [u.shape[:-2] for u in (qr, k, vr)]
    if any(math.prod(s) != bt for s in batch_shapes):
        return None
    fine = _refine(batch_shapes, bt)
    if fine is None:
        return None
    operands = [(qr, (lq, e)), (k, (lk, e)), (vr, (lk, ev))]
    made: list[Node] = []
    # The model's own head dim as the kernel's (the innermost batch dim) where the operands
    # allow it; the terms are summed into one tensor where read in place they do not.
    cuts = [*range(len(fine) - 1, -1, -1), len(fine)]
    for together in (False, True):
        mask = _mask(graph, site, fine, lq, lk, made, together)
        if mask is None and (site.terms or site.bool_terms):
            return None
        for cut in cuts:
            b, h = math.prod(fine[:cut]), math.prod(fine[cut:])
            if b > 65535 or h > 65535:
                continue
            got = [_four(u, u.shape[:-2], fine, tail, cut) for u, tail in operands]
            m4 = _four_mask(mask, fine, (lq, lk), cut) if mask is not None else None
            if all(g is not None for g in got) and (mask is None or m4 is not None):
                break
        else:
            made.clear()
            continue
        break
    else:
        return None
    args: list[Operand] = [g for g in got if g is not None]
    if m4 is not None:
        args.append(m4)
    attn = Node(
        graph.new_id(), "attn", "flash", args, (b, lq, h, ev),
        {"causal": False, "scale": site.scale, "mask": "add" if mask is not None else "",
         "dtype": site.dtype},
        site.second.origin, site.second.line,
    )  # fmt: skip
    made.append(attn)
    stored = Use(attn.vid, (b, h, lq, ev), strides=(lq * h * ev, ev, h * ev, 1))
    at = graph.nodes.index(site.second)
    graph.nodes[at:at] = made
    _move_reads(graph, site.second, stored)
    return attn


def _mask(
    graph: Graph,
    site: _Site,
    fine: Shape,
    lq: int,
    lk: int,
    made: list[Node],
    together: bool,
) -> Use | None:
    """The one additive mask over (*fine, lq, lk): a lone term read in place (unless
    `together`), else the terms summed, in the scores' type as eager adds them, into the
    smallest tensor their broadcasting allows (the nodes made go to `made`)."""
    terms: list[Use] = []
    for u, shape in site.terms + site.bool_terms:
        over = layout.expand(u, shape) if tuple(u.shape) != tuple(shape) else u
        st = layout.strides_of(over)
        fs = _split(st[:-2], shape[:-2], fine)
        if fs is None:
            return None
        terms.append(Use(u.vid, (*fine, lq, lk), strides=(*fs, *st[-2:]), offset=u.offset))
    fills = len(site.bool_terms)
    if not terms:
        return None
    if len(terms) == 1 and not fills and not together:
        return terms[0]
    full = (*fine, lq, lk)
    st_all = [layout.strides_of(t) for t in terms]
    small = tuple(d if any(st[i] for st in st_all) else 1 for i, d in enumerate(full))

    def narrowed(t: Use) -> Use:
        st = layout.strides_of(t)
        return Use(t.vid, small, strides=tuple(s if d != 1 else 0 for s, d in zip(st, small,
                   strict=True)), offset=t.offset)  # fmt: skip

    acc: Use | None = None
    for i, t in enumerate(terms):
        value: Use = narrowed(t)
        if i >= len(terms) - fills:  # -inf where the condition holds, else 0
            fill = Node(
                graph.new_id(), "ew", "where", [value, Const(-math.inf), Const(0.0)], small,
                {"dtype": site.dtype}, site.second.origin, site.second.line,
            )  # fmt: skip
            made.append(fill)
            value = Use(fill.vid, small)
        if acc is None:
            acc = value
            continue
        node = Node(
            graph.new_id(), "ew", "add", [acc, value], small, {"dtype": site.dtype},
            site.second.origin, site.second.line,
        )  # fmt: skip
        made.append(node)
        acc = Use(node.vid, small)
    assert acc is not None
    if acc.strided:  # one term, summed with nothing: copied, so that it is read contiguously
        copy = Node(
            graph.new_id(), "ew", "identity", [acc], small, {"dtype": site.dtype},
            site.second.origin, site.second.line,
        )  # fmt: skip
        made.append(copy)
        acc = Use(copy.vid, small)
    st = layout.contiguous_strides(small)
    return Use(acc.vid, full, strides=tuple(s if d != 1 else 0 for s, d in zip(st, small,
               strict=True)))  # fmt: skip


def _move_reads(graph: Graph, old: Node, stored: Use) -> None:
    """Every read of `old` (a contiguous (batch, query, value) value) reads the attn node's
    storage instead: by strides where they can say it, else from one copy in old's layout."""
    storage = math.prod(stored.shape)
    copy: Node | None = None

    def moved(a: Operand) -> Operand:
        nonlocal copy
        if not isinstance(a, Use) or a.vid != old.vid:
            return a
        got = layout.compose(a, stored, storage) if not a.trans else None
        if got is not None:
            return got
        if copy is None:
            copy = Node(
                graph.new_id(), "ew", "identity", [stored], stored.shape,
                {"dtype": old.dtype}, old.origin, old.line,
            )  # fmt: skip
        return Use(copy.vid, a.shape, a.trans, a.strides, a.offset)

    for n in graph.nodes:
        n.args = [moved(a) for a in n.args]
    graph.outputs = [moved(u) for u in graph.outputs]  # type: ignore[misc]
    if copy is not None:
        graph.nodes.insert(graph.nodes.index(old), copy)


def written_out_attention(graph: Graph) -> list[tuple[Node, Node, Node]]:
    """Replace each recognised site; returns (first GEMM, second GEMM, attn node) per site. The
    replaced nodes are left unread for the caller's prune."""
    out: list[tuple[Node, Node, Node]] = []
    for second in [n for n in graph.nodes if n.kind == "gemm"]:
        nodes = {n.vid: n for n in graph.nodes}
        readers = _readers(graph)
        site = _match(graph, nodes, readers, second)
        if site is None:
            continue
        attn = _apply(graph, nodes, site)
        if attn is not None:
            out.append((site.first, site.second, attn))
    return out
