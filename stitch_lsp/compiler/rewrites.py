"""Algebraic rewrites of the IR graph that remove work, one catalogue entry per identity.

They run after capture and before partitioning (`apply_rewrites`), to a fixed point, and each
application is recorded so that the candidate says which identities it relies on. Every entry is
exact in real arithmetic; in float32 an entry may reassociate (a product of two constants, a sum
of weight rows taken before the dot product), and its test bounds that error against float64.

What the catalogue does not do, and why:
- fold a scale or bias tensor into a GEMM's or a convolution's weights: weights are runtime
  parameters, so a fold would be a pass over the weight on every call, while the scale it saves
  is a multiply inside an epilogue kernel that reads the GEMM's output anyway;
- touch a batch norm: KernelBench modules run in training mode, where the statistics come from
  the batch and the running buffers are updated, so there is nothing constant to fold.
Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Const, Graph, Node, NodeKind, Operand, Shape, Use, numel

# -- graph surgery ----------------------------------------------------------------------------


def _users(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for vid in dict.fromkeys(u.vid for u in n.uses):
            out.setdefault(vid, []).append(n)
    return out


def _only_user(graph: Graph, vid: int, users: dict[int, list[Node]]) -> Node | None:
    """The one node that reads `vid`, when nothing else (another node, the caller) does."""
    if any(u.vid == vid for u in graph.outputs):
        return None
    readers = users.get(vid, [])
    return readers[0] if len(readers) == 1 else None


def _plain(u: Operand) -> bool:
    """A use read by the consumer's own flat index (no transpose, strides or offset)."""
    return isinstance(u, Use) and not u.trans and not u.strided


def _new_node(
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


def _insert_before(graph: Graph, anchor: Node, nodes: list[Node]) -> None:
    at = graph.nodes.index(anchor)
    graph.nodes[at:at] = nodes


def _redirect(graph: Graph, old: int, new: int, skip: Node | None = None) -> None:
    """Every read of `old` reads `new` instead (both stored contiguously, same element count)."""

    def moved(a: Operand) -> Operand:
        if isinstance(a, Use) and a.vid == old:
            return Use(new, a.shape, a.trans, a.strides, a.offset)
        return a

    for n in graph.nodes:
        if n is not skip:
            n.args = [moved(a) for a in n.args]
    graph.outputs = [moved(u) for u in graph.outputs]  # type: ignore[misc]


def _const_arg(n: Node) -> tuple[Use, float, int] | None:
    """(the tensor operand, the constant, the constant's position) of a tensor-number op."""
    if len(n.args) != 2:
        return None
    a, b = n.args
    if isinstance(a, Use) and isinstance(b, Const):
        return a, b.value, 1
    if isinstance(a, Const) and isinstance(b, Use):
        return b, a.value, 0
    return None


def _axes(n: Node) -> tuple[int, ...]:
    """A reduction's or pool's integer tuple parameter `axes`."""
    return _ints(n, "axes")


def _ints(n: Node, key: str) -> tuple[int, ...]:
    value = n.params.get(key, ())
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else ()


def _float_ew(n: Node | None) -> bool:
    return n is not None and n.kind == "ew" and n.dtype == "float32"


# -- the catalogue ----------------------------------------------------------------------------


@dataclass
class Applied:
    """One application: the entry's name, where it fired (reference ops), the nodes it made."""

    name: str
    site: str
    vids: set[int] = field(default_factory=set)

    def describe(self) -> str:
        return f"{self.name}: {self.site}"


Apply = Callable[[Graph], list[Applied]]


@dataclass(frozen=True)
class Rewrite:
    name: str
    identity: str  # the algebra, in one line
    apply: Apply


def _self_add_as_scale(graph: Graph) -> list[Applied]:
    """x + x is x * 2 (exact), so a following constant scale folds with it."""
    out = []
    for n in graph.nodes:
        if n.fn == "add" and _float_ew(n) and len(n.args) == 2 and not n.params:
            a, b = n.args
            if isinstance(a, Use) and a == b:
                n.fn, n.args = "mul", [a, Const(2.0)]
                out.append(Applied("self_add_as_scale", n.origin, {n.vid}))
    return out


def _affine(n: Node) -> tuple[Use, float, float] | None:
    """n as x * k + m with constant k, m, or None."""
    if not _float_ew(n) or n.params:
        return None
    got = _const_arg(n)
    if got is None:
        return None
    x, c, pos = got
    if n.fn == "mul":
        return x, c, 0.0
    if n.fn == "add":
        return x, 1.0, c
    if n.fn == "div" and pos == 1 and c != 0.0:
        return x, 1.0 / c, 0.0
    if n.fn == "sub":
        return (x, 1.0, -c) if pos == 1 else (x, -1.0, c)
    return None


# Ops whose result jumps where their operand crosses a value (an integer, another operand): a
# reassociated operand, one rounding step off, can land on the other side.
_STEPS = frozenset({"floor", "ceil", "trunc", "sign", "eq", "ne", "lt", "le", "gt", "ge", "where"})


def _feeds_a_step(graph: Graph, vid: int, users: dict[int, list[Node]], depth: int = 6) -> bool:
    """Whether `vid` reaches a step function, an integer result or a PyTorch fallback (a cast
    to long, as T5's relative-position buckets take) through elementwise ops."""
    for r in users.get(vid, []):
        if r.kind == "aten" or (r.kind == "ew" and (r.fn in _STEPS or r.dtype == "int64")):
            return True
        if r.kind == "ew" and depth and _feeds_a_step(graph, r.vid, users, depth - 1):
            return True
    return False


def _affine_chain(graph: Graph) -> list[Applied]:
    """A run of tensor-constant mul/div/add/sub ops is one affine map x * k + m: at most two
    ops instead of the run's length (`(x / 2) * 1.5` is `x * 0.75`). Not where the result
    reaches a step (floor, a comparison, a cast to an integer): the folded constant rounds
    differently, and at a step one rounding step is a whole bucket."""
    users = _users(graph)
    out = []
    done: set[int] = set()
    for first in list(graph.nodes):
        if first.vid in done or _affine(first) is None:
            continue
        got = _affine(first)
        assert got is not None
        x0, k, m = got
        chain = [first]
        while True:
            nxt = _only_user(graph, chain[-1].vid, users)
            step = _affine(nxt) if nxt is not None else None
            if nxt is None or step is None or nxt.shape != first.shape:
                break
            if not _plain(step[0]) or step[0].shape != first.shape:
                break
            chain.append(nxt)
            k, m = k * step[1], m * step[1] + step[2]
        done |= {n.vid for n in chain}
        needed = int(k != 1.0) + int(m != 0.0)
        if needed >= len(chain) or _feeds_a_step(graph, chain[-1].vid, users):
            continue
        last = chain[-1]
        if needed == 2:
            first.fn, first.args = "mul", [x0, Const(k)]
            last.fn, last.args = "add", [Use(first.vid, first.shape), Const(m)]
            keep = {first.vid, last.vid}
        elif needed == 1:
            last.fn, last.args = ("mul", [x0, Const(k)]) if k != 1.0 else ("add", [x0, Const(m)])
            keep = {last.vid}
        else:
            last.fn, last.args = "identity", [x0]
            keep = {last.vid}
        graph.nodes = [n for n in graph.nodes if n.vid in keep or n not in chain]
        sites = ", ".join(dict.fromkeys(n.origin for n in chain))
        out.append(Applied("affine_chain", sites, keep))
        users = _users(graph)
    return out


def _scale_past_sum(graph: Graph) -> list[Applied]:
    """sum(x * c) = sum(x) * c: the constant multiplies the reduced values, not every input."""
    users = _users(graph)
    out = []
    for r in list(graph.nodes):
        if r.kind != "reduce" or r.fn != "sum" or not _plain(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        p = graph.node(u.vid)
        if p is None or _only_user(graph, p.vid, users) is not r or p.fn not in ("mul", "div"):
            continue
        got = _affine(p)
        if got is None or got[2] != 0.0:
            continue
        x, k, _ = got
        if not _plain(x) or x.shape != p.shape or numel(u.shape) != numel(p.shape):
            continue
        r.args = [Use(x.vid, u.shape)]
        scaled = _new_node(graph, p, "ew", "mul", [Use(r.vid, r.shape), Const(k)], r.shape)
        _redirect(graph, r.vid, scaled.vid)
        graph.nodes.insert(graph.nodes.index(r) + 1, scaled)
        graph.nodes.remove(p)
        out.append(Applied("scale_past_sum", f"{p.origin} after {r.origin}", {scaled.vid}))
        users = _users(graph)
    return out


def _feature_terms(
    graph: Graph, u: Use, r: Node, users: dict[int, list[Node]]
) -> tuple[Use, list[tuple[str, Use]], list[Node]] | None:
    """Walk from the sum's operand back to a GEMM through adds and subtracts of per-feature
    vectors (a Linear's bias, a `x - self.subtract` parameter): (the GEMM's use, the vectors
    with their op, "add" or "sub", the chain's nodes), or None where anything else intervenes."""
    terms: list[tuple[str, Use]] = []
    chain: list[Node] = []
    cur, reader = u, r
    n_out = u.shape[-1]
    while True:
        node = graph.node(cur.vid)
        if node is None:
            return None
        if node.kind == "gemm":
            return cur, terms, chain
        if (
            node.fn not in ("add", "sub")
            or not _float_ew(node)
            or len(node.uses) != 2
            or len(node.args) != 2
            or _only_user(graph, node.vid, users) is not reader
        ):
            return None
        a, b = node.uses
        if node.fn == "add" and a.vid in graph.leaves and b.vid not in graph.leaves:
            a, b = b, a  # the vector first: swap, the sum is the same
        lf = graph.leaves.get(b.vid)
        if lf is None or lf.shape != (n_out,) or not _plain(a) or not _plain(b):
            return None
        if tuple(d for d in b.shape if d != 1) != (n_out,) or b.shape[-1] != n_out:
            return None
        if a.shape != node.shape or numel(a.shape) != numel(node.shape):
            return None
        terms.append((node.fn, b))
        chain.append(node)
        cur, reader = a, node


def _sum_before_linear(graph: Graph) -> list[Applied]:
    """sum_j (x W^T + b - s)_j = x . (sum_j W_j) + sum_j b_j - sum_j s_j: a sum over a GEMM's
    output features, through adds and subtracts of per-feature vectors (a Linear's bias, a
    subtracted parameter), is a matrix-vector product with the summed weight rows, so the GEMM
    becomes a pass over the weight (summed afresh on every call, as it may change) and a row
    reduction of x. A mean is a sum times 1/n, so it fires there too."""
    users = _users(graph)
    out = []
    for r in list(graph.nodes):
        if r.kind != "reduce" or r.fn != "sum" or not _plain(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        axes = _axes(r)
        if axes != (len(u.shape) - 1,):
            continue
        walked = _feature_terms(graph, u, r, users)
        if walked is None:
            continue
        gemm_use, terms, chain = walked
        g = graph.node(gemm_use.vid)
        if g is None or g.kind != "gemm" or g.params.get("batch", 1) != 1 or len(g.args) != 2:
            continue
        if _only_user(graph, g.vid, users) is not (chain[-1] if chain else r):
            continue
        a, w = g.args
        assert isinstance(a, Use) and isinstance(w, Use)
        (m_rows, k), n_out = a.shape, g.shape[-1]
        if not _plain(a) or gemm_use.shape[-1] != n_out or w.strided:
            continue
        lead = u.shape[:-1]
        if math.prod(lead) != m_rows:
            continue
        if w.trans:  # W stored (n, k): sum its rows
            wsum = _new_node(
                graph, g, "reduce", "sum", [Use(w.vid, (n_out, k))], (1, k), axes=(0,), field="sum"
            )
        else:  # B stored (k, n): sum its columns
            wsum = _new_node(
                graph, g, "reduce", "sum", [Use(w.vid, (k, n_out))], (k, 1), axes=(1,), field="sum"
            )
        xs = Use(a.vid, (*lead, k))
        prod = _new_node(graph, g, "ew", "mul", [xs, Use(wsum.vid, (k,))], (*lead, k))
        before, made = [wsum, prod], [wsum, prod]
        r.args = [Use(prod.vid, prod.shape)]
        sites = f"{r.origin} over {g.origin}"
        last = r
        after: list[Node] = []
        for fn, vec in reversed(terms):  # in the reference's order, nearest the GEMM first
            lf = graph.leaves[vec.vid]
            vsum = _new_node(
                graph, r, "reduce", "sum", [Use(lf.vid, lf.shape)], (1,), axes=(0,), field="sum"
            )
            before.append(vsum)
            step = _new_node(
                graph, r, "ew", fn, [Use(last.vid, r.shape), Use(vsum.vid, (1,))], r.shape
            )
            after.append(step)
            last = step
        made += before[2:] + after
        if after:
            _redirect(graph, r.vid, last.vid)  # the steps are not placed yet: they keep r
            at = graph.nodes.index(r) + 1
            graph.nodes[at:at] = after
            sites += (
                " (with its bias)"
                if len(terms) == 1 and terms[0][0] == "add"
                else (f" (with {len(terms)} per-feature vectors)")
            )
        _insert_before(graph, r, before)
        graph.nodes = [n for n in graph.nodes if n is not g and n not in chain]
        out.append(Applied("sum_before_linear", sites, {n.vid for n in made} | {r.vid}))
        users = _users(graph)
    return out


@dataclass(frozen=True)
class _Range:
    """Bounds on an elementwise value; `exact` where float32 evaluation cannot step past them
    (tanhf never exceeds 1, a clamp returns its bound), otherwise a margin is required."""

    lo: float
    hi: float
    exact_lo: bool = True
    exact_hi: bool = True


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


_GELU_MIN = -0.17  # below gelu's minimum, -0.16997 at x = -0.7518


def _range_of(graph: Graph, u: Operand, depth: int = 0) -> _Range | None:
    if isinstance(u, Const):
        return _Range(u.value, u.value)
    n = graph.node(u.vid)
    if n is None or not _float_ew(n) or depth > 16:
        return None
    inner = _range_of(graph, n.args[0], depth + 1) if n.args else None
    if n.fn in ("clamp", "hardtanh", "clamp_min", "clamp_max"):
        lo = float(n.params.get("lo", -math.inf))  # type: ignore[arg-type]
        hi = float(n.params.get("hi", math.inf))  # type: ignore[arg-type]
        if inner is None:
            return _Range(lo, hi)
        lo_side = (inner.lo, inner.exact_lo) if inner.lo > lo else (lo, True)
        hi_side = (inner.hi, inner.exact_hi) if inner.hi < hi else (hi, True)
        return _Range(lo_side[0], hi_side[0], lo_side[1], hi_side[1])
    if n.fn == "tanh":
        return _Range(-1.0, 1.0)
    if n.fn == "sigmoid":
        return _Range(0.0, 1.0)
    if n.fn == "relu":
        return _Range(0.0, math.inf if inner is None else max(inner.hi, 0.0), True, False)
    if n.fn == "gelu" and inner is not None and math.isfinite(inner.hi):
        return _Range(_GELU_MIN, max(_gelu(inner.hi), 0.0), False, False)
    got = _const_arg(n) if n.fn == "mul" else None
    if got is not None and got[1] > 0 and (inner := _range_of(graph, got[0], depth + 1)):
        c = got[1]
        pow2 = math.frexp(c)[0] == 0.5  # scaling by 2^k is exact
        return _Range(
            inner.lo * c,
            inner.hi * c,
            inner.exact_lo and (pow2 or inner.lo == 0),
            inner.exact_hi and (pow2 or inner.hi == 0),
        )
    return None


def _within(bound: float, value: float, exact: bool, below: bool) -> bool:
    """`bound` <= value (below) or value <= `bound`, with a margin unless `value` is exact."""
    margin = 0.0 if exact else 1e-5 * max(abs(value), 1.0)
    return bound <= value - margin if below else value + margin <= bound


def _redundant_clamp(graph: Graph) -> list[Applied]:
    """A clamp whose input already lies within a bound drops that bound, and the whole clamp
    when both hold (`clamp(tanh(x), -1, 1)` is `tanh(x)`)."""
    out = []
    for n in graph.nodes:
        if n.fn not in ("clamp", "hardtanh", "clamp_min", "clamp_max") or not _float_ew(n):
            continue
        r = _range_of(graph, n.args[0])
        if r is None:
            continue
        lo, hi = n.params.get("lo"), n.params.get("hi")
        lo_ok = lo is None or _within(float(lo), r.lo, r.exact_lo, True)  # type: ignore[arg-type]
        hi_ok = hi is None or _within(float(hi), r.hi, r.exact_hi, False)  # type: ignore[arg-type]
        if lo_ok and hi_ok:
            n.fn, n.params = "identity", {}
        elif lo_ok and lo is not None:
            n.fn, n.params = "clamp_max", {"hi": hi}
        elif hi_ok and hi is not None:
            n.fn, n.params = "clamp_min", {"lo": lo}
        else:
            continue
        out.append(Applied("redundant_clamp", n.origin, {n.vid}))
    return out


def _mean_of(graph: Graph, u: Use, axes: tuple[int, ...]) -> Use | None:
    """The input whose mean over `axes` the value `u` reads, if it is one (keepdim)."""
    n = graph.node(u.vid)
    if n is None:
        return None
    src: Node | None = None
    if n.kind == "reduce" and n.fn == "moments" and n.params.get("field") == "mean":
        src = n
    elif n.fn == "mul" and _float_ew(n) and (got := _const_arg(n)) is not None:
        src = graph.node(got[0].vid)
        if src is None or src.kind != "reduce" or src.fn != "sum":
            return None
        x = src.args[0]
        assert isinstance(x, Use)
        count = math.prod(x.shape[a] for a in axes)
        if not math.isclose(got[1] * count, 1.0, rel_tol=1e-12):
            return None
    else:
        return None
    if _axes(src) != axes:
        return None
    x = src.args[0]
    return x if isinstance(x, Use) else None


def _centred_sum_cancels(graph: Graph) -> list[Applied]:
    """sum(x - mean(x, d), d) = 0 (and so its mean): a centred value sums to nothing over the
    dims it was centred on, so the reduction becomes the constant 0 (float32 would give
    rounding noise around 0; an inf or NaN in x, which gives NaN, is not kept)."""
    out = []
    for r in graph.nodes:
        if r.kind != "reduce" or r.fn != "sum" or not _plain(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        d = graph.node(u.vid)
        axes = _axes(r)
        if d is None or d.fn != "sub" or not _float_ew(d) or len(d.uses) != 2:
            continue
        x, m = d.args
        if not isinstance(x, Use) or not isinstance(m, Use) or u.shape != d.shape:
            continue
        if x.shape != d.shape or not _plain(m):
            continue
        centred = _mean_of(graph, m, axes)
        if centred is None or centred != x:
            continue
        r.kind, r.fn, r.args, r.params = "ew", "identity", [Const(0.0)], {}
        out.append(Applied("centred_sum_cancels", f"{r.origin} of {d.origin}", {r.vid}))
    return out


def _pool_before_pointwise_conv(graph: Graph) -> list[Applied]:
    """avg_pool(conv1x1(z)) as conv1x1(avg_pool(z)), as torch.compile does for DenseNet's
    transition: both are linear, a 1x1 convolution without bias mixes channels pixel by pixel
    and an unpadded average mixes pixels channel by channel, so they commute, and the
    convolution then runs on a quarter (for 2x2) of the pixels. A convolution that something
    else reads stays, and the pooled branch gets its own small one."""
    out = []
    for p in list(graph.nodes):
        if p.kind != "pool" or p.fn != "avg_pool" or "clipped" in p.params:
            continue
        if any(_ints(p, "padding")):
            continue
        x = p.args[0]
        node = graph.node(x.vid) if isinstance(x, Use) else None
        if node is None or node.kind != "conv" or node.fn not in ("conv1d", "conv2d", "conv3d"):
            continue
        assert isinstance(x, Use)
        if x.shape != node.shape or not _plain(x):
            continue
        z, w = node.args[0], node.args[1]
        if not isinstance(z, Use) or not isinstance(w, Use) or len(node.args) != 2:
            continue
        stride, padding = node.params.get("stride", ()), node.params.get("padding")
        one = isinstance(stride, tuple) and all(int(v) == 1 for v in stride)
        unpadded = padding == "valid" or (isinstance(padding, tuple) and not any(padding))
        if not (one and unpadded and all(int(v) == 1 for v in w.shape[2:])):
            continue
        pooled = _new_node(
            graph, p, "pool", "avg_pool", [z], (*z.shape[:2], *p.shape[2:]), **p.params
        )
        conv = _new_node(
            graph, node, "conv", node.fn, [Use(pooled.vid, pooled.shape), w], p.shape, **node.params
        )
        _insert_before(graph, p, [pooled, conv])
        _redirect(graph, p.vid, conv.vid)
        graph.nodes.remove(p)
        out.append(
            Applied(
                "pool_before_pointwise_conv",
                f"{p.origin} after {node.origin}",
                {pooled.vid, conv.vid},
            )
        )
    return out


def _pool_before_linear(graph: Graph) -> list[Applied]:
    """avg_pool1d(x W^T + b, k) over the output features = x (W pooled)^T + b pooled, where
    row i of W pooled is the mean of W's rows i k .. i k + k - 1: a Linear followed by an
    average pool over its features (held-out level 2's 98_Matmul_AvgPool_GELU_Scale_Max) is
    a GEMM k times narrower, after a pass over the weight (pooled afresh on every call)."""
    users = _users(graph)
    out = []
    for p in list(graph.nodes):
        if p.kind != "pool" or p.fn != "avg_pool" or "clipped" in p.params:
            continue
        kernel, stride = _ints(p, "kernel"), _ints(p, "stride")
        if len(kernel) != 1 or stride != kernel or any(_ints(p, "padding")):
            continue
        if any(d != 1 for d in _ints(p, "dilation")):
            continue
        x = p.args[0]
        if not isinstance(x, Use) or not _plain(x) or len(x.shape) != 3 or x.shape[1] != 1:
            continue
        kk = kernel[0]
        src = graph.node(x.vid)
        if src is None or (src.kind != "gemm" and not _float_ew(src)):
            continue
        bias: Use | None = None
        g = src
        if src.kind == "ew":
            if src.fn != "add" or len(src.uses) != 2 or _only_user(graph, src.vid, users) is not p:
                continue
            mm_use, b = src.uses
            if b.vid not in graph.leaves:
                mm_use, b = b, mm_use
            found = graph.node(mm_use.vid)
            if (
                found is None
                or b.vid not in graph.leaves
                or graph.leaves[b.vid].shape != (found.shape[-1],)
            ):
                continue
            g = found
            if not _plain(b) or not _plain(mm_use) or mm_use.shape != src.shape:
                continue
            bias = b
        if g.kind != "gemm" or g.params.get("batch", 1) != 1 or len(g.args) != 2:
            continue
        if _only_user(graph, g.vid, users) is not (p if bias is None else src):
            continue
        if g.dtype != "float32":
            continue
        a, w = g.args
        assert isinstance(a, Use) and isinstance(w, Use)
        if not _plain(a) or w.strided or len(g.shape) != 2:
            continue
        (m_rows, k_in), n_out = a.shape, g.shape[-1]
        if n_out % kk or p.shape != (m_rows, 1, n_out // kk):
            continue
        n_p = n_out // kk
        if w.trans:  # W stored (n, k_in): mean of each run of kk rows
            wsum = _new_node(
                graph,
                g,
                "reduce",
                "sum",
                [Use(w.vid, (n_p, kk, k_in))],
                (n_p, 1, k_in),
                axes=(1,),
                field="sum",
            )
            b_use = Use(0, (k_in, n_p), trans=True)
        else:  # B stored (k_in, n): mean of each run of kk columns
            wsum = _new_node(
                graph,
                g,
                "reduce",
                "sum",
                [Use(w.vid, (k_in, n_p, kk))],
                (k_in, n_p, 1),
                axes=(2,),
                field="sum",
            )
            b_use = Use(0, (k_in, n_p))
        wmean = _new_node(
            graph, g, "ew", "mul", [Use(wsum.vid, wsum.shape), Const(1.0 / kk)], wsum.shape
        )
        made = [wsum, wmean]
        mm = _new_node(
            graph,
            g,
            "gemm",
            "gemm",
            [a, Use(wmean.vid, b_use.shape, b_use.trans)],
            (m_rows, n_p),
            **g.params,
        )
        made.append(mm)
        last = mm
        if bias is not None:
            bsum = _new_node(
                graph,
                p,
                "reduce",
                "sum",
                [Use(bias.vid, (n_p, kk))],
                (n_p, 1),
                axes=(1,),
                field="sum",
            )
            bmean = _new_node(
                graph, p, "ew", "mul", [Use(bsum.vid, bsum.shape), Const(1.0 / kk)], bsum.shape
            )
            last = _new_node(
                graph,
                p,
                "ew",
                "add",
                [Use(mm.vid, mm.shape), Use(bmean.vid, (n_p,))],
                (m_rows, n_p),
            )
            made += [bsum, bmean, last]
        _insert_before(graph, p, made)
        _redirect(graph, p.vid, last.vid)
        graph.nodes = [n for n in graph.nodes if n is not p and n is not g and n is not src]
        out.append(
            Applied(
                "pool_before_linear",
                f"{p.origin} after {g.origin}" + (" (with its bias)" if bias else ""),
                {n.vid for n in made},
            )
        )
        users = _users(graph)
    return out


def _sum_node(graph: Graph, like: Node, u: Use, axes: tuple[int, ...], keep: Shape) -> Node:
    """A sum of `u` over `axes` (keepdim shape `keep`), or a copy where they all have size 1
    (the kernels do not reduce over size-1 dims)."""
    if all(u.shape[a] == 1 for a in axes):
        return _new_node(graph, like, "ew", "identity", [u], keep)
    return _new_node(graph, like, "reduce", "sum", [u], keep, axes=axes, field="sum")


def _range_sums(
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
            sums[(0, length)] = _sum_node(graph, like, u, (axis,), keep)
            made.append(sums[(0, length)])
        return sums[(0, length)]

    for lo, hi in dict.fromkeys(ranges):
        if (lo, hi) in sums:
            continue
        left_out = [*range(lo), *range(hi, length)]
        if (lo, hi) == (0, length) or (len(left_out) <= 4 and 4 * len(left_out) <= length):
            last = whole()
            for i in left_out:
                last = _new_node(
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
        sums[(lo, hi)] = _sum_node(graph, like, layout.slice_(u, axis, lo, hi), (axis,), keep)
        made.append(sums[(lo, hi)])
    if len(ranges) == 1:
        return Use(sums[ranges[0]].vid, keep)
    stacked = (*u.shape[:axis], len(ranges), *u.shape[axis + 1 :])
    cat = _new_node(
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


def _tap_ranges(
    length: int, out: int, kernel: int, stride: int, pad: int, dilation: int
) -> list[tuple[int, int]]:
    """For each tap k of one transposed-convolution dim, the input positions [lo, hi) whose
    output o = i stride - pad + k dilation lands inside [0, out); padding crops the border."""
    ranges = []
    for k in range(kernel):
        first = pad - k * dilation
        lo = max(0, -(-first // stride))
        hi = min(length, (out - 1 + first) // stride + 1)
        ranges.append((lo, max(lo, hi)))
    return ranges


def _spatial_sum_of_conv_transpose(graph: Graph) -> list[Applied]:
    """sum over leading spatial dims of conv_transpose(x, W) + b = conv_transpose over the
    other dims of (x's per-tap sums, W with those taps as input channels) + n b.

    An output position o of a transposed convolution's dim takes input i through tap k when
    o = i s - p + k d, so summing the output over that dim gives, for each tap, the sum of x over
    the input positions whose tap-k output stays inside: a range, the whole dim when nothing
    is padded. The summed dims' taps then become input channels (x's range sums stacked per
    tap, W permuted to match) of a transposed convolution over the dims that remain, or a GEMM
    when none remain; taps with the whole range share one sum. Fires on held-out level 2's
    42 (unpadded global mean: a GEMM of the pixel sums and tap sums), 44 (padded, strided
    global mean) and 13 (a depth mean of a padded ConvTranspose3d: a ConvTranspose2d with
    3 x C_in input channels, 1/32 of the FLOPs)."""
    users = _users(graph)
    out = []
    for r in list(graph.nodes):
        if r.kind != "reduce" or r.fn != "sum" or not _plain(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        rank = len(u.shape)
        m = len(_axes(r))
        if rank not in (3, 4, 5) or m < 1 or _axes(r) != tuple(range(2, 2 + m)):
            continue
        terms: list[tuple[str, Use]] = []
        chain: list[Node] = []
        cur, reader = u, r
        conv = None
        while True:
            node = graph.node(cur.vid)
            if node is None:
                break
            if node.kind == "conv":
                conv = node
                break
            if (
                node.fn not in ("add", "sub")
                or not _float_ew(node)
                or len(node.args) != 2
                or _only_user(graph, node.vid, users) is not reader
            ):
                break
            a, b = node.uses
            if node.fn == "add" and a.vid in graph.leaves and b.vid not in graph.leaves:
                a, b = b, a
            lf = graph.leaves.get(b.vid)
            channels = u.shape[1]
            if lf is None or numel(lf.shape) != channels or not _plain(a) or a.shape != u.shape:
                break
            if tuple(d for d in b.shape if d != 1) != (channels,) or b.shape[-rank + 1 :][0] != (
                channels
            ):
                break
            terms.append((node.fn, b))
            chain.append(node)
            cur, reader = a, node
        if conv is None or not conv.fn.startswith("conv_transpose") or cur.shape != conv.shape:
            continue
        if _only_user(graph, conv.vid, users) is not reader or len(conv.args) != 2:
            continue
        if int(conv.params.get("groups", 1) or 1) != 1 or conv.dtype != "float32":  # type: ignore[call-overload]
            continue
        x, w = conv.args
        if not isinstance(x, Use) or not isinstance(w, Use) or not _plain(x) or not _plain(w):
            continue
        spatial = rank - 2
        per_dim = {
            key: _ints(conv, key) or (default,) * spatial
            for key, default in (
                ("stride", 1),
                ("padding", 0),
                ("dilation", 1),
                ("output_padding", 0),
            )
        }
        if any(len(v) != spatial for v in per_dim.values()):
            continue
        ranges = [
            _tap_ranges(
                x.shape[2 + j],
                conv.shape[2 + j],
                w.shape[2 + j],
                per_dim["stride"][j],
                per_dim["padding"][j],
                per_dim["dilation"][j],
            )
            for j in range(m)
        ]
        if any(lo >= hi for rs in ranges for lo, hi in rs):
            continue  # a tap that lands nowhere: rare enough to leave alone
        whole = [all(rg == (0, x.shape[2 + j]) for rg in rs) for j, rs in enumerate(ranges)]
        taps = [1 if whole[j] else w.shape[2 + j] for j in range(m)]
        if math.prod(x.shape[2 : 2 + m]) < 2 * math.prod(taps):
            continue  # no fewer FLOPs
        made: list[Node] = []
        # x's sums: the dims every tap reads whole in one pass, then one sum per distinct
        # tap range of each cropped dim, stacked along it
        xs = x
        full_axes = tuple(2 + j for j in range(m) if whole[j])
        if full_axes:
            keep = tuple(1 if a in full_axes else d for a, d in enumerate(x.shape))
            total = _sum_node(graph, conv, x, full_axes, keep)
            made.append(total)
            xs = Use(total.vid, keep)
        for j in (j for j in range(m) if not whole[j]):
            xs = _range_sums(graph, conv, xs, 2 + j, ranges[j], made)
        # W: summed over the taps that share the whole range, the summed dims' taps moved
        # next to C_in (they are input channels now)
        ws = w
        if full_axes:
            wshape = tuple(1 if a in full_axes else d for a, d in enumerate(w.shape))
            wsum = _sum_node(graph, conv, w, full_axes, wshape)
            made.append(wsum)
            ws = Use(wsum.vid, wshape)
        order = (0, *range(2, 2 + m), 1, *range(2 + m, rank))
        moved = layout.permute(ws, order)
        if moved.strided:
            copy = _new_node(graph, conv, "ew", "identity", [moved], moved.shape)
            made.append(copy)
            moved = Use(copy.vid, moved.shape)
        batch, c_in, c_out = x.shape[0], x.shape[1], conv.shape[1]
        channels_in = c_in * math.prod(taps)
        kept_out = conv.shape[2 + m :]
        result = (batch, c_out, *kept_out)
        a_use = Use(xs.vid, (batch, channels_in, *x.shape[2 + m :]))
        w_use = Use(moved.vid, (channels_in, c_out, *w.shape[2 + m :]))
        if not kept_out:
            heavy = _new_node(graph, conv, "gemm", "gemm", [a_use, w_use], result, batch=1)
        else:
            params = dict(conv.params)
            params.update({k: v[m:] for k, v in per_dim.items()})
            heavy = _new_node(
                graph,
                conv,
                "conv",
                f"conv_transpose{len(kept_out)}d",
                [a_use, w_use],
                result,
                **params,
            )
        made.append(heavy)
        last = heavy
        positions = math.prod(conv.shape[2 : 2 + m])
        vec_shape = (c_out, *([1] * len(kept_out)))
        for fn, vec in reversed(terms):  # each vector once per summed output position
            scaled = _new_node(
                graph, r, "ew", "mul", [Use(vec.vid, vec_shape), Const(float(positions))], vec_shape
            )
            last = _new_node(
                graph,
                r,
                "ew",
                fn,
                [Use(last.vid, result), Use(scaled.vid, vec_shape)],
                result,
            )
            made += [scaled, last]
        _insert_before(graph, r, made)
        _redirect(graph, r.vid, last.vid)
        graph.nodes = [n for n in graph.nodes if n is not r and n is not conv and n not in chain]
        cropped = sum(not f for f in whole)
        out.append(
            Applied(
                "spatial_sum_of_conv_transpose",
                f"{r.origin} over {conv.origin}"
                + (f" ({cropped} padded dim(s) summed per tap)" if cropped else "")
                + (f" (with {len(terms)} per-channel vector(s))" if terms else ""),
                {n.vid for n in made},
            )
        )
        users = _users(graph)
    return out


def _plain_average(p: Node) -> bool:
    """An average pool whose every window holds `kernel` counted elements (no padding, no
    clipped window): its value is linear in its input, window by window."""
    return (
        p.kind == "pool"
        and p.fn == "avg_pool"
        and "clipped" not in p.params
        and not any(_ints(p, "padding"))
        and all(d == 1 for d in _ints(p, "dilation"))
    )


def _uniform_over(a: Operand, rank: int, dims: list[int]) -> bool:
    """The same value along `dims` of a rank-`rank` result: a number, or 1 (or absent) there."""
    if isinstance(a, Const):
        return True
    aligned = (1,) * (rank - len(a.shape)) + tuple(a.shape)
    return len(aligned) == rank and all(aligned[d] == 1 for d in dims)


def _pool_before_channel_affine(graph: Graph) -> list[Applied]:
    """avg_pool(u * a + b) = avg_pool(u) * a + b where a and b are the same across each window
    (numbers, scalars, per-channel vectors): the pool moves up to its producer (a transposed
    convolution, for pool_of_conv_transpose), and the arithmetic runs on the pooled pixels."""
    users = _users(graph)
    out = []
    for p in list(graph.nodes):
        if not _plain_average(p) or not _plain(p.args[0]):
            continue
        x = p.args[0]
        assert isinstance(x, Use)
        e = graph.node(x.vid)
        if e is None or not _float_ew(e) or e.fn not in ("add", "sub", "mul", "div"):
            continue
        if len(e.args) != 2 or e.shape != x.shape or _only_user(graph, e.vid, users) is not p:
            continue
        rank = len(e.shape)
        # dims the pool mixes or subsamples (a window of 1 with a stride still drops pixels)
        pooled_dims = [
            2 + j
            for j, k in enumerate(_ints(p, "kernel"))
            if k > 1 or p.shape[2 + j] != e.shape[2 + j]
        ]

        spans = [
            isinstance(a, Use)
            and _plain(a)
            and a.shape == e.shape
            and not _uniform_over(a, rank, pooled_dims)
            for a in e.args
        ]
        if spans.count(True) != 1 or not all(
            s or _uniform_over(a, rank, pooled_dims) for s, a in zip(spans, e.args, strict=True)
        ):
            continue
        at = spans.index(True)
        if e.fn == "div" and at != 0:
            continue  # a / pool(u) is not pool(a / u)
        u = e.args[at]
        assert isinstance(u, Use)
        pooled = _new_node(graph, p, "pool", "avg_pool", [u], p.shape, **p.params)
        args = list(e.args)
        args[at] = Use(pooled.vid, p.shape)
        after = _new_node(graph, e, "ew", e.fn, args, p.shape, **e.params)
        _insert_before(graph, p, [pooled, after])
        _redirect(graph, p.vid, after.vid)
        graph.nodes = [n for n in graph.nodes if n is not p and n is not e]
        out.append(
            Applied("pool_before_channel_affine", f"{p.origin} before {e.origin}", {pooled.vid})
        )
        users = _users(graph)
    return out


def _tiling(p: Node) -> bool:
    """An average or max pool whose windows tile its input: as long as their stride, unpadded,
    undilated, every window whole (no ceil-mode window past the edge)."""
    if p.kind != "pool" or p.fn not in ("avg_pool", "max_pool") or "clipped" in p.params:
        return False
    kernel, x = _ints(p, "kernel"), p.args[0]
    if kernel != _ints(p, "stride") or any(_ints(p, "padding")) or not isinstance(x, Use):
        return False
    if any(d != 1 for d in _ints(p, "dilation")) or len(kernel) != len(x.shape) - 2:
        return False
    return all(o == i // k for o, i, k in zip(p.shape[2:], x.shape[2:], kernel, strict=True))


def _pool_of_pool(graph: Graph) -> list[Applied]:
    """pool_k2(pool_k1(x)) = pool_(k1 k2)(x), both averages or both maxima, for windows that
    tile: window m of the second covers windows k2 m .. k2 m + k2 - 1 of the first, which
    cover x's k1 k2 m .. k1 k2 m + k1 k2 - 1, and floor(floor(n / k1) / k2) = floor(n / (k1
    k2)). One pass over x instead of two, and no intermediate (held-out level 2's 6 and 78,
    maxima; 72, averages once past the batch norm's arithmetic). Exact for maxima."""
    users = _users(graph)
    out = []
    for p in list(graph.nodes):
        if not _tiling(p) or not _plain(p.args[0]):
            continue
        x = p.args[0]
        assert isinstance(x, Use)
        first = graph.node(x.vid)
        if first is None or first.fn != p.fn or not _tiling(first) or x.shape != first.shape:
            continue
        if not _plain(first.args[0]) or _only_user(graph, first.vid, users) is not p:
            continue
        kernel = tuple(
            a * b for a, b in zip(_ints(first, "kernel"), _ints(p, "kernel"), strict=True)
        )
        merged = _new_node(
            graph,
            p,
            "pool",
            p.fn,
            [first.args[0]],
            p.shape,
            **{**p.params, "kernel": kernel, "stride": kernel},
        )
        _insert_before(graph, p, [merged])
        _redirect(graph, p.vid, merged.vid)
        graph.nodes = [n for n in graph.nodes if n is not p and n is not first]
        out.append(Applied("pool_of_pool", f"{p.origin} after {first.origin}", {merged.vid}))
        users = _users(graph)
    return out


def _pool_of_conv_transpose(graph: Graph) -> list[Applied]:
    """avg_pool_k(conv_transpose_k(x, W)) = conv(x, V) with V's taps the means of W's taps
    that land in one window.

    With pool windows as long as the transposed convolution's stride k, each window holds
    one output of each phase, so tap t of input i lands in window m exactly when
    i = m + delta_t, delta_t = -floor((t d - p) / k): the pooled output is a stride-1
    convolution of x (zero outside it, as the transposed convolution reads it) whose taps
    are W's taps summed by delta and divided by the window's size. Held-out level 2's
    50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling: a 2x2x2 convolution at the pooled
    size instead of a 3x3x3 transposed one that writes 8 times as many pixels."""
    users = _users(graph)
    out = []
    for p in list(graph.nodes):
        if not _plain_average(p) or not _plain(p.args[0]):
            continue
        y = p.args[0]
        assert isinstance(y, Use)
        conv = graph.node(y.vid)
        if conv is None or conv.kind != "conv" or not conv.fn.startswith("conv_transpose"):
            continue
        if _only_user(graph, conv.vid, users) is not p or len(conv.args) != 2:
            continue
        if int(conv.params.get("groups", 1) or 1) != 1 or conv.dtype != "float32":  # type: ignore[call-overload]
            continue
        x, w = conv.args
        if not isinstance(x, Use) or not isinstance(w, Use) or not _plain(x) or not _plain(w):
            continue
        n = len(x.shape) - 2
        kernel, pstride = _ints(p, "kernel"), _ints(p, "stride")
        cstride, cpad, cdil = _ints(conv, "stride"), _ints(conv, "padding"), _ints(conv, "dilation")
        if not (len(kernel) == len(pstride) == len(cstride) == len(cpad) == len(cdil) == n):
            continue
        if kernel != pstride or kernel != cstride:
            continue
        plan: list[tuple[int, int, list[tuple[int, int]], int, int]] = []
        for j in range(n):
            k, d, crop, taps = kernel[j], cdil[j], cpad[j], w.shape[2 + j]
            deltas = [-((t * d - crop) // k) for t in range(taps)]
            low = min(deltas)
            width = max(deltas) - low + 1
            # each kernel position's taps: a run (delta falls as t grows)
            at = [[t for t in range(taps) if deltas[t] == low + pos] for pos in range(width)]
            length, pooled = x.shape[2 + j], p.shape[2 + j]
            if not all(at) or pooled != conv.shape[2 + j] // k:
                break  # a position no tap reaches (dilation past the stride)
            plan.append((low, width, [(r[0], r[-1] + 1) for r in at], length, pooled))
        if len(plan) != n:
            continue
        if math.prod(q[1] for q in plan) > math.prod(w.shape[2:]):
            continue
        made: list[Node] = []
        # x: cut or zero-padded so that output m reads x[m + low ...]
        cut = x
        before, after = [0, 0], [0, 0]
        for j, (low, width, _runs, length, pooled) in enumerate(plan):
            need = pooled + width - 1
            lo_cut, lo_pad = max(0, low), max(0, -low)
            hi_pad = need - lo_pad - (length - lo_cut)
            hi_cut = max(0, -hi_pad)
            cut = layout.slice_(cut, 2 + j, lo_cut, length - hi_cut)
            before.append(lo_pad)
            after.append(max(0, hi_pad))
        padding: tuple[int, ...] = (0,) * n
        xin = cut
        if before == after:
            padding = tuple(before[2:])
            if xin.strided:
                copy = _new_node(graph, conv, "ew", "identity", [xin], xin.shape)
                made.append(copy)
                xin = Use(copy.vid, xin.shape)
        else:
            padded = tuple(dim + b + a for dim, b, a in zip(xin.shape, before, after, strict=True))
            pad = _new_node(
                graph, conv, "gather", "pad", [xin], padded, before=tuple(before), value=0.0
            )
            made.append(pad)
            xin = Use(pad.vid, padded)
        # V: W's taps summed per kernel position (positions in rising delta), as (out, in, ...)
        wv = w
        for j, (_low, _width, runs, _length, _pooled) in enumerate(plan):
            wv = _range_sums(graph, conv, wv, 2 + j, runs, made)
        swapped = layout.permute(wv, (1, 0, *range(2, n + 2)))
        v = _new_node(
            graph, conv, "ew", "mul", [swapped, Const(1.0 / math.prod(kernel))], swapped.shape
        )
        made.append(v)
        params = {
            key: val
            for key, val in conv.params.items()
            if key not in ("stride", "padding", "dilation", "output_padding")
        }
        params.update(stride=(1,) * n, padding=padding, dilation=(1,) * n)
        heavy = _new_node(
            graph, conv, "conv", f"conv{n}d", [xin, Use(v.vid, v.shape)], p.shape, **params
        )
        made.append(heavy)
        _insert_before(graph, p, made)
        _redirect(graph, p.vid, heavy.vid)
        graph.nodes = [q for q in graph.nodes if q is not p and q is not conv]
        out.append(
            Applied(
                "pool_of_conv_transpose", f"{p.origin} over {conv.origin}", {q.vid for q in made}
            )
        )
        users = _users(graph)
    return out


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled(n: Node | None, c: float) -> Use | None:
    """The operand of `n` when n is operand * c (either order), else None."""
    if n is None or n.kind != "ew" or n.fn != "mul":
        return None
    got = _const_arg(n)
    return got[0] if got is not None and abs(got[1] - c) <= 1e-6 * abs(c) else None


def _is_cube(graph: Graph, n: Node | None, x: Use) -> bool:
    """n is x**3: the cube op, or x * x * x / square(x) * x in any order."""
    if n is None or n.kind != "ew":
        return False
    if n.fn == "cube":
        return n.args == [x]
    if n.fn != "mul" or len(n.args) != 2 or not all(isinstance(a, Use) for a in n.args):
        return False
    for sq, lin in (n.args, n.args[::-1]):
        inner = graph.node(sq.vid)  # type: ignore[union-attr]
        if lin != x or inner is None or inner.kind != "ew":
            continue
        if (inner.fn == "square" and inner.args == [x]) or (
            inner.fn == "mul" and inner.args == [x, x]
        ):
            return True
    return False


def _tanh_gelu_inner(graph: Graph, u: Operand) -> Use | None:
    """x when `u` is tanh(sqrt(2/pi) (x + 0.044715 x^3)) + 1, else None."""
    if not isinstance(u, Use):
        return None
    plus = graph.node(u.vid)
    if plus is None or plus.kind != "ew" or plus.fn != "add" or _const_arg(plus) is None:
        return None
    t, one, _ = _const_arg(plus)  # type: ignore[misc]
    th = graph.node(t.vid)
    if one != 1.0 or th is None or th.fn != "tanh" or th.kind != "ew":
        return None
    arg = th.args[0]
    inner_use = _scaled(graph.node(arg.vid), _SQRT_2_OVER_PI) if isinstance(arg, Use) else None
    inner = graph.node(inner_use.vid) if inner_use is not None else None
    if inner is None or inner.kind != "ew" or inner.fn != "add" or len(inner.args) != 2:
        return None
    for x, k in (inner.args, inner.args[::-1]):
        if not isinstance(x, Use) or not isinstance(k, Use) or not _plain(x):
            continue
        cube = _scaled(graph.node(k.vid), 0.044715)
        if cube is not None and _is_cube(graph, graph.node(cube.vid), x):
            return x
    return None


def _written_out_gelu_tanh(graph: Graph) -> list[Applied]:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) spelled out (GPT-2's NewGELU, minGPT)
    as one gelu(approximate='tanh'): the same formula, computed without rounding each step to a
    bf16/fp16 tensor, and a tail the GEMM's cuBLASLt epilogue takes whole in half precision."""
    out = []
    for n in list(graph.nodes):
        if n.kind != "ew" or n.fn != "mul" or len(n.args) != 2 or set(n.params) - {"dtype"}:
            continue
        for half, rest in (n.args, n.args[::-1]):
            if not isinstance(half, Use):
                continue
            x = _scaled(graph.node(half.vid), 0.5)
            if x is None or _tanh_gelu_inner(graph, rest) != x:
                continue
            n.fn, n.args = "gelu_tanh", [x]
            out.append(Applied("written_out_gelu_tanh", n.origin, {n.vid}))
            break
    return out


def _channels_last(graph: Graph) -> list[Applied]:
    """Convolutions that read an NHWC storage as NCHW run channels-last, and elementwise ops
    between them follow their operands' storage order (relayout.py): exact, only where values
    lie changes."""
    from stitch_lsp.compiler.relayout import channels_last

    convs = [n for n in channels_last(graph) if n.kind == "conv" and n in graph.nodes]
    if not convs:
        return []
    sites = ", ".join(dict.fromkeys(n.origin for n in convs))
    count = f"{len(convs)} convolution{'s' if len(convs) > 1 else ''}"
    return [Applied("channels_last", f"{count} run NHWC ({sites})", {n.vid for n in convs})]


def _written_out_attention(graph: Graph) -> list[Applied]:
    """softmax(q k^T c + m) v spelled out (two batched GEMMs around a softmax) as the flash
    kernel's attn node, in bf16/fp16 (attention_pattern.py): the scores never reach memory."""
    from stitch_lsp.compiler.attention_pattern import written_out_attention

    return [
        Applied("written_out_attention", f"{first.origin} .. {second.origin}", {attn.vid})
        for first, second, attn in written_out_attention(graph)
    ]


CATALOGUE: tuple[Rewrite, ...] = (
    Rewrite(
        "written_out_gelu_tanh",
        "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = gelu(x, approximate='tanh')",
        _written_out_gelu_tanh,
    ),
    Rewrite("self_add_as_scale", "x + x = 2 x", _self_add_as_scale),
    Rewrite(
        "redundant_clamp",
        "clamp(f(x), lo, hi) = f(x) where f's range lies in [lo, hi]",
        _redundant_clamp,
    ),
    Rewrite("centred_sum_cancels", "sum(x - mean(x, d), d) = 0", _centred_sum_cancels),
    Rewrite("scale_past_sum", "sum(c x) = c sum(x)", _scale_past_sum),
    Rewrite(
        "sum_before_linear", "sum_j (x W^T + b)_j = x (sum_j W_j) + sum_j b_j", _sum_before_linear
    ),
    Rewrite("affine_chain", "((x k1 + m1) k2 + m2) = x (k1 k2) + (m1 k2 + m2)", _affine_chain),
    Rewrite(
        "pool_before_linear",
        "avg_pool(x W^T + b, k) = x (avg_pool_rows(W, k))^T + avg_pool(b, k)",
        _pool_before_linear,
    ),
    Rewrite(
        "spatial_sum_of_conv_transpose",
        "sum_dims(conv_transpose(x, W) + b) = conv_transpose_rest(sum_tap_ranges x, W) + n b",
        _spatial_sum_of_conv_transpose,
    ),
    Rewrite(
        "pool_before_channel_affine",
        "avg_pool(u a + b) = avg_pool(u) a + b for a, b constant over each window",
        _pool_before_channel_affine,
    ),
    Rewrite(
        "pool_of_pool",
        "pool_k2(pool_k1(x)) = pool_(k1 k2)(x) (averages or maxima) for windows that tile",
        _pool_of_pool,
    ),
    Rewrite(
        "pool_of_conv_transpose",
        "avg_pool_k(conv_transpose_k(x, W)) = conv(x, mean of W's taps per window offset)",
        _pool_of_conv_transpose,
    ),
    Rewrite(
        "pool_before_pointwise_conv",
        "avg_pool(conv1x1(z)) = conv1x1(avg_pool(z))",
        _pool_before_pointwise_conv,
    ),
    Rewrite(
        "channels_last",
        "conv(permute(x)) = permute(conv_nhwc(x)); f(permute(a), ...) = permute(f(a, ...))",
        _channels_last,
    ),
    Rewrite(
        "written_out_attention",
        "softmax(q k^T c + m) v = flash_attention(q, k, v, mask=m, scale=c)",
        _written_out_attention,
    ),
)

BY_NAME: dict[str, Rewrite] = {r.name: r for r in CATALOGUE}


def apply_rewrites(graph: Graph, names: tuple[str, ...] | None = None) -> list[Applied]:
    """Apply the catalogue (or the entries named) until none fires; dead nodes are pruned."""
    entries = CATALOGUE if names is None else tuple(BY_NAME[n] for n in names)
    applied: list[Applied] = []
    for _ in range(8):
        fired = [a for r in entries for a in r.apply(graph)]
        if not fired:
            break
        applied += fired
        graph.prune()
    return applied
