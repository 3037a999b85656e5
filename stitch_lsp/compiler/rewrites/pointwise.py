"""Entries on elementwise chains and their reductions: self-adds, affine chains, scales past
sums, clamps that cannot bind, centred sums that cancel, and the written-out tanh GELU."""

from __future__ import annotations

import math
from dataclasses import dataclass

from stitch_lsp.compiler.ir import Const, Graph, Node, Operand, Use, numel
from stitch_lsp.compiler.rewrites.surgery import (
    Applied,
    axes_of,
    const_arg,
    float_ew,
    new_node,
    only_user,
    plain_use,
    redirect,
    users_of,
)


def self_add_as_scale(graph: Graph) -> list[Applied]:
    """x + x is x * 2 (exact), so a following constant scale folds with it."""
    out = []
    for n in graph.nodes:
        if n.fn == "add" and float_ew(n) and len(n.args) == 2 and not n.params:
            a, b = n.args
            if isinstance(a, Use) and a == b:
                n.fn, n.args = "mul", [a, Const(2.0)]
                out.append(Applied("self_add_as_scale", n.origin, {n.vid}))
    return out


def _affine(n: Node) -> tuple[Use, float, float] | None:
    """n as x * k + m with constant k, m, or None."""
    if not float_ew(n) or n.params:
        return None
    got = const_arg(n)
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


def affine_chain(graph: Graph) -> list[Applied]:
    """A run of tensor-constant mul/div/add/sub ops is one affine map x * k + m: at most two
    ops instead of the run's length (`(x / 2) * 1.5` is `x * 0.75`). Not where the result
    reaches a step (floor, a comparison, a cast to an integer): the folded constant rounds
    differently, and at a step one rounding step is a whole bucket."""
    users = users_of(graph)
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
            nxt = only_user(graph, chain[-1].vid, users)
            step = _affine(nxt) if nxt is not None else None
            if nxt is None or step is None or nxt.shape != first.shape:
                break
            if not plain_use(step[0]) or step[0].shape != first.shape:
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
        users = users_of(graph)
    return out


def scale_past_sum(graph: Graph) -> list[Applied]:
    """sum(x * c) = sum(x) * c: the constant multiplies the reduced values, not every input."""
    users = users_of(graph)
    out = []
    for r in list(graph.nodes):
        if r.kind != "reduce" or r.fn != "sum" or not plain_use(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        p = graph.node(u.vid)
        if p is None or only_user(graph, p.vid, users) is not r or p.fn not in ("mul", "div"):
            continue
        got = _affine(p)
        if got is None or got[2] != 0.0:
            continue
        x, k, _ = got
        if not plain_use(x) or x.shape != p.shape or numel(u.shape) != numel(p.shape):
            continue
        r.args = [Use(x.vid, u.shape)]
        scaled = new_node(graph, p, "ew", "mul", [Use(r.vid, r.shape), Const(k)], r.shape)
        redirect(graph, r.vid, scaled.vid)
        graph.nodes.insert(graph.nodes.index(r) + 1, scaled)
        graph.nodes.remove(p)
        out.append(Applied("scale_past_sum", f"{p.origin} after {r.origin}", {scaled.vid}))
        users = users_of(graph)
    return out


@dataclass(frozen=True)
class ValueRange:
    """Bounds on an elementwise value; `exact` where float32 evaluation cannot step past them
    (tanhf never exceeds 1, a clamp returns its bound), otherwise a margin is required."""

    lo: float
    hi: float
    exact_lo: bool = True
    exact_hi: bool = True


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


_GELU_MIN = -0.17  # below gelu's minimum, -0.16997 at x = -0.7518


def value_range(graph: Graph, u: Operand, depth: int = 0) -> ValueRange | None:
    """Bounds on an elementwise value from the ops that made it (clamps, bounded activations,
    positive scales, minima and maxima), or None where nothing bounds it. NaN passes through
    every op here and is not a bound's concern."""
    if isinstance(u, Const):
        return ValueRange(u.value, u.value)
    n = graph.node(u.vid)
    if n is None or not float_ew(n) or depth > 16:
        return None
    if n.fn in ("minimum", "maximum") and len(n.args) == 2:
        return _extremum(n.fn, *(value_range(graph, a, depth + 1) for a in n.args))
    inner = value_range(graph, n.args[0], depth + 1) if n.args else None
    if n.fn == "identity":
        return inner
    if n.fn in ("clamp", "hardtanh", "clamp_min", "clamp_max"):
        lo = float(n.params.get("lo", -math.inf))  # type: ignore[arg-type]
        hi = float(n.params.get("hi", math.inf))  # type: ignore[arg-type]
        if inner is None:
            return ValueRange(lo, hi)
        lo_side = (inner.lo, inner.exact_lo) if inner.lo > lo else (lo, True)
        hi_side = (inner.hi, inner.exact_hi) if inner.hi < hi else (hi, True)
        return ValueRange(lo_side[0], hi_side[0], lo_side[1], hi_side[1])
    if n.fn == "tanh":
        return ValueRange(-1.0, 1.0)
    if n.fn == "sigmoid":
        return ValueRange(0.0, 1.0)
    if n.fn == "relu":
        return ValueRange(0.0, math.inf if inner is None else max(inner.hi, 0.0), True, False)
    if n.fn == "gelu" and inner is not None and math.isfinite(inner.hi):
        return ValueRange(_GELU_MIN, max(_gelu(inner.hi), 0.0), False, False)
    got = const_arg(n) if n.fn == "mul" else None
    if got is not None and got[1] > 0 and (inner := value_range(graph, got[0], depth + 1)):
        c = got[1]
        pow2 = math.frexp(c)[0] == 0.5  # scaling by 2^k is exact
        return ValueRange(
            inner.lo * c,
            inner.hi * c,
            inner.exact_lo and (pow2 or inner.lo == 0),
            inner.exact_hi and (pow2 or inner.hi == 0),
        )
    return None


def _extremum(fn: str, a: ValueRange | None, b: ValueRange | None) -> ValueRange | None:
    """minimum(a, b) is below either's upper bound, and above the lower of their lower ones
    (maximum mirrored); one known side is enough for the bound it gives."""
    if a is None and b is None:
        return None
    if fn == "maximum":
        low = max(((r.lo, r.exact_lo) for r in (a, b) if r is not None), key=lambda t: t[0])
        high = (max(a.hi, b.hi), a.exact_hi and b.exact_hi) if a and b else (math.inf, False)
        return ValueRange(low[0], high[0], low[1], high[1])
    high = min(((r.hi, r.exact_hi) for r in (a, b) if r is not None), key=lambda t: t[0])
    low = (min(a.lo, b.lo), a.exact_lo and b.exact_lo) if a and b else (-math.inf, False)
    return ValueRange(low[0], high[0], low[1], high[1])


def _within(bound: float, value: float, exact: bool, below: bool) -> bool:
    """`bound` <= value (below) or value <= `bound`, with a margin unless `value` is exact."""
    margin = 0.0 if exact else 1e-5 * max(abs(value), 1.0)
    return bound <= value - margin if below else value + margin <= bound


def redundant_clamp(graph: Graph) -> list[Applied]:
    """A clamp whose input already lies within a bound drops that bound, and the whole clamp
    when both hold (`clamp(tanh(x), -1, 1)` is `tanh(x)`)."""
    out = []
    for n in graph.nodes:
        if n.fn not in ("clamp", "hardtanh", "clamp_min", "clamp_max") or not float_ew(n):
            continue
        r = value_range(graph, n.args[0])
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
    elif n.fn == "mul" and float_ew(n) and (got := const_arg(n)) is not None:
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
    if axes_of(src) != axes:
        return None
    x = src.args[0]
    return x if isinstance(x, Use) else None


def centred_sum_cancels(graph: Graph) -> list[Applied]:
    """sum(x - mean(x, d), d) = 0 (and so its mean): a centred value sums to nothing over the
    dims it was centred on, so the reduction becomes the constant 0 (float32 would give
    rounding noise around 0; an inf or NaN in x, which gives NaN, is not kept)."""
    out = []
    for r in graph.nodes:
        if r.kind != "reduce" or r.fn != "sum" or not plain_use(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        d = graph.node(u.vid)
        axes = axes_of(r)
        if d is None or d.fn != "sub" or not float_ew(d) or len(d.uses) != 2:
            continue
        x, m = d.args
        if not isinstance(x, Use) or not isinstance(m, Use) or u.shape != d.shape:
            continue
        if x.shape != d.shape or not plain_use(m):
            continue
        centred = _mean_of(graph, m, axes)
        if centred is None or centred != x:
            continue
        r.kind, r.fn, r.args, r.params = "ew", "identity", [Const(0.0)], {}
        out.append(Applied("centred_sum_cancels", f"{r.origin} of {d.origin}", {r.vid}))
    return out


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled(n: Node | None, c: float) -> Use | None:
    """The operand of `n` when n is operand * c (either order), else None."""
    if n is None or n.kind != "ew" or n.fn != "mul":
        return None
    got = const_arg(n)
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
    if plus is None or plus.kind != "ew" or plus.fn != "add" or const_arg(plus) is None:
        return None
    t, one, _ = const_arg(plus)  # type: ignore[misc]
    th = graph.node(t.vid)
    if one != 1.0 or th is None or th.fn != "tanh" or th.kind != "ew":
        return None
    arg = th.args[0]
    inner_use = _scaled(graph.node(arg.vid), _SQRT_2_OVER_PI) if isinstance(arg, Use) else None
    inner = graph.node(inner_use.vid) if inner_use is not None else None
    if inner is None or inner.kind != "ew" or inner.fn != "add" or len(inner.args) != 2:
        return None
    for x, k in (inner.args, inner.args[::-1]):
        if not isinstance(x, Use) or not isinstance(k, Use) or not plain_use(x):
            continue
        cube = _scaled(graph.node(k.vid), 0.044715)
        if cube is not None and _is_cube(graph, graph.node(cube.vid), x):
            return x
    return None


def written_out_gelu_tanh(graph: Graph) -> list[Applied]:
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
