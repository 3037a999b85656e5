"""Turn partitioned groups into CUDA kernels, C launchers and the ModelNew forward that calls them.

Each fusion group becomes one kernel:
  pointwise: grid-stride over the flat index, two float4 iterations in flight per thread when
    sizes and pointers allow; max/avg pooling windows gather inside the same loop;
  row/chan reductions: one block per kept row (or channel), warp shuffles + shared memory;
  tile reductions: TX (32..128) threads along the contiguous kept dim, TY along the reduced dim.
When there are too few rows (or column blocks) to fill the GPU, the reduced dim is split over
several blocks that leave partial states in a workspace, and one launch per pass combines them.
Shapes are compile-time constants (the candidate is specialised to the problem it was made for,
and ModelNew checks its input shapes at run time). GEMMs call cuBLAS / cuBLASLt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

from stitch_lsp.compiler.attention import ATTENTION_PREAMBLE, COMBINE_KERNEL, attention_launcher
from stitch_lsp.compiler.catalog import EW
from stitch_lsp.compiler.direct_conv import direct_conv_lines, is_direct
from stitch_lsp.compiler.ir import Const, Graph, Leaf, Node, Shape, Unsupported, Use, numel
from stitch_lsp.compiler.layout import blas_operand, index_expr, spatial_coords
from stitch_lsp.compiler.partition import Group, Layout, reads
from stitch_lsp.compiler.recurrent import outputs_needed, rnn_launcher, rnn_preamble
from stitch_lsp.compiler.target import ASSUMED_SMS
from stitch_lsp.compiler.templates import (
    CUBLAS_PREAMBLE,
    CUBLASLT_PREAMBLE,
    PREAMBLE,
    REDUCED_PREAMBLE,
    STATE_TYPES,
    ew_expr,
    float_literal,
)

INT32_LIMIT = 2**31 - 1
SPLIT_MIN_ELEMS = 16384  # a row is split over blocks only in pieces at least this long
STATE_BYTES = {
    "SumS": 4,
    "SumD": 8,
    "MaxS": 4,
    "MinS": 4,
    "MomS": 12,
    "SmxS": 8,
    "ArgMaxS": 8,
    "ArgMinS": 8,
}


def bcast_offset(index: str, consumer: Shape, operand: Shape) -> tuple[str, bool]:
    """C expression for an operand's element offset, given the consumer's flat index.

    Returns (expr, identity). Dims where the operand is broadcast contribute nothing; runs of
    neighbouring dims are merged so a bias over channels costs one div and one mod.
    """
    op = tuple(operand)
    while len(op) > len(consumer) and op[0] == 1:
        op = op[1:]
    if len(op) > len(consumer):
        raise Unsupported(f"operand shape {operand} does not broadcast to {consumer}")
    op = (1,) * (len(consumer) - len(op)) + op
    runs: list[list[int]] = []  # [size, used]
    for c, o in zip(consumer, op, strict=True):
        if o not in (1, c):
            raise Unsupported(f"operand shape {operand} does not broadcast to {consumer}")
        if c == 1:
            continue
        used = int(o == c)
        if runs and runs[-1][1] == used:
            runs[-1][0] *= c
        else:
            runs.append([c, used])
    if not any(u for _, u in runs):
        return "0", False
    if all(u for _, u in runs):
        return index, True
    terms = []
    stride_c = 1
    stride_o = 1
    for i in range(len(runs) - 1, -1, -1):
        size, used = runs[i]
        if used:
            t = index if stride_c == 1 else f"({index} / {stride_c})"
            if i != 0:
                t = f"({t} % {size})"
            if stride_o != 1:
                t = f"{t} * {stride_o}"
            terms.append(t)
            stride_o *= size
        stride_c *= size
    return " + ".join(reversed(terms)), False


# Storage types of the values kernels read and write: math is float in registers throughout,
# and a bf16/fp16 value converts once at its load and once at its store.
REDUCED_CTYPES = {"bfloat16": "__nv_bfloat16", "float16": "__half"}


# cuBLAS's data types for GEMM operands and results (accumulation is always FP32).
BLAS_TYPES = {"float32": "CUDA_R_32F", "bfloat16": "CUDA_R_16BF", "float16": "CUDA_R_16F"}


def _rounded(node: Node, expr: str) -> str:
    """An op whose result PyTorch rounds to bf16/fp16 is rounded here too, in registers, so a
    fused chain tracks eager's per-op rounding instead of drifting from it."""
    ctype = REDUCED_CTYPES.get(node.dtype)
    return f"st_round<{ctype}>({expr})" if ctype else expr


# Smallest C (elements) worth a padded copy: below it an align-1 kernel costs microseconds.
PAD_C_MIN = 1 << 20


def padded_ldc(ab: str, c_dtype: str, rows: int, n: int) -> int:
    """The row pitch of a GEMM's C on the tensor cores: n, or n rounded up to 16 bytes when
    rows of n elements are misaligned (GPT-2's 50,257-word head: cuBLAS then runs an align-1
    CUTLASS kernel, 1.67 ms of its 3.46 ms forward on an H100; Inductor pads such GEMMs too)."""
    per = 16 // (4 if c_dtype == "float32" else 2)
    if ab == "float32" or n % per == 0 or rows * n < PAD_C_MIN:
        return n
    return -(-n // per) * per


def storage_ctype(dtype: str) -> str:
    """The C type a stored value of IR dtype `dtype` has in memory."""
    return REDUCED_CTYPES.get(dtype) or {"int64": "long long", "bool": "bool"}.get(dtype, "float")


@dataclass
class Arg:
    name: str
    vid: int
    ctype: str
    role: str  # in | inout | out | ws
    nbytes: int = 0  # workspace size (role ws)

    @property
    def reduced(self) -> bool:
        """A bf16 or fp16 tensor: converted at each load and store; four at a time by st_ld4 and
        st_st4 (8 bytes) where float tensors use float4."""
        return any(t in self.ctype for t in REDUCED_CTYPES.values())

    def load(self, offset: str) -> str:
        """The float value at `offset` (through the read-only cache for inputs)."""
        raw = f"__ldg({self.name} + {offset})" if self.role == "in" else f"{self.name}[{offset}]"
        return f"st_f({raw})" if self.reduced else raw

    def store(self, offset: str, value: str) -> str:
        """The statement that stores float `value` at `offset` in this argument's type."""
        if self.reduced:
            ctype = self.ctype.replace(" __restrict__", "").rstrip("*").strip()
            return f"{self.name}[{offset}] = st_to<{ctype}>({value});"
        return f"{self.name}[{offset}] = {value};"


@dataclass
class GroupKernel:
    group: Group
    name: str
    args: list[Arg]
    source: str
    comment: str


@dataclass
class _Scope:
    """One place code is emitted: a loop body (full space) or a row/column scope (reduced)."""

    space: str
    index: str
    lines: list[str] = field(default_factory=list)
    memo: dict[object, str] = field(default_factory=dict)
    lane: bool = False
    vec_loads: dict[str, str] = field(default_factory=dict)
    sfx: str = ""  # names the float4 registers when two vector iterations share a body


class _GroupGen:
    def __init__(self, graph: Graph, group: Group, arg_of: dict[int, Arg]) -> None:
        self.graph = graph
        self.g = group
        self.arg_of = arg_of  # external vid -> pointer arg
        self.arg_of_name = {a.name: a for a in arg_of.values()}
        # argument name -> float4 register, of the last vector body full_parts emitted
        self.vector_loads: dict[str, str] = {}
        self.nodes = {n.vid: n for n in group.nodes}
        self.red_scope: _Scope | None = None
        self.tmp = 0
        biggest = max(
            [
                group.full_numel,
                *(numel(u.shape) for n in group.nodes for u in n.uses),
                *(numel(graph.shape_of(u.vid)) for n in group.nodes for u in n.uses),
            ]
        )
        self.idx_t = "long long" if biggest > INT32_LIMIT else "int"
        self.arg_index: dict[str, str] = {}  # arg-reduction state -> index along the reduced dim

    # -- expression emission ---------------------------------------------------------------------
    def value(self, vid: int, scope: _Scope) -> str:
        node = self.nodes[vid]
        space = self.g.space[vid]
        if space == "red" and scope.space == "full":
            assert self.red_scope is not None
            return self.value(vid, self.red_scope)
        if vid in scope.memo:
            return scope.memo[vid]
        if node.kind == "reduce":
            raise Unsupported(f"internal: reduction %{vid} used before its pass")
        if node.kind == "pool":
            return self.pool(node, scope)
        if node.kind == "conv":  # a transposed convolution of few terms (direct_conv.py)
            return self.direct_conv(node, scope)
        if node.kind == "gather":
            return self.gather(node, scope)
        args = [self.operand(a, node.shape, scope) for a in node.args]
        name = f"v{vid}" if vid >= 0 else f"vp{-vid}"
        coords = _coords(scope.index, node.shape) if EW[node.fn].index else None
        expr = _rounded(node, ew_expr(node.fn, args, node.params, coords))
        scope.lines.append(f"const float {name} = {expr};")
        scope.memo[vid] = name
        return name

    def pool(self, node: Node, scope: _Scope) -> str:
        """Max/avg pooling window of the output element at the flat index (NC + spatial)."""
        x = node.args[0]
        assert isinstance(x, Use)
        arg = self.arg_of[x.vid]
        out, inp = node.shape, x.shape
        nd = len(out) - 2
        k = node.params["kernel"]
        st = node.params["stride"]
        pad = node.params["padding"]
        dil = node.params["dilation"]
        is_max = node.fn == "max_pool"
        name = f"v{node.vid}"
        i = scope.index
        coords, spatial = spatial_coords(i, out)
        lines = [f"float {name} = {'-INFINITY' if is_max else '0.f'};", "{", *coords]
        lines.append(f"  const idx_t nc = {i} / {spatial};")
        base = "nc"
        loops = []
        for d in range(nd):
            ax = d + 2
            kd, sd, pd, dd = k[d], st[d], pad[d], dil[d]  # type: ignore[index]
            loops += [
                f"  for (int w{ax} = 0; w{ax} < {kd}; ++w{ax}) {{",
                f"    const idx_t i{ax} = o{ax} * {sd} - {pd} + w{ax} * {dd};",
                f"    if (i{ax} < 0 || i{ax} >= {inp[ax]}) continue;",
            ]
            base = f"({base} * {inp[ax]} + i{ax})"
        load = arg.load(base)
        body = f"{name} = fmaxf({name}, {load});" if is_max else f"{name} += {load};"
        lines += loops + ["    " + body] + ["  }"] * nd
        clipped = node.params.get("clipped")
        if clipped and not is_max:
            lines.append("  idx_t cnt = 1;")
            for d in range(nd):
                ax = d + 2
                kd, sd, pd, n = k[d], st[d], pad[d], inp[ax]  # type: ignore[index]
                lines.append(f"  {{ const idx_t s = o{ax} * {sd} - {pd};")
                lines.append(f"    const idx_t e = min(s + {kd}, (idx_t){n + pd});")
                if clipped == "padded":
                    lines.append("    cnt *= e - s; }")
                else:
                    lines.append(f"    cnt *= min(e, (idx_t){n}) - max(s, (idx_t)0); }}")
            lines.append(f"  {name} /= (float)cnt;")
        lines.append("}")
        if not is_max and not clipped:
            count = 1
            for d in range(nd):
                count *= k[d]  # type: ignore[index]
            lines.append(f"{name} *= {float_literal(1.0 / count)};")
        scope.lines += lines
        scope.memo[node.vid] = name
        return name

    def direct_conv(self, node: Node, scope: _Scope) -> str:
        """A transposed convolution's output element at the flat index, from its stored input
        and weight (direct_conv.py)."""
        x, w = node.uses[:2]
        ax, aw = self.arg_of[x.vid], self.arg_of[w.vid]
        name = f"v{node.vid}"
        scope.lines += direct_conv_lines(node, scope.index, name, ax.load("{0}"), aw.load("{0}"))
        if REDUCED_CTYPES.get(node.dtype):  # cuDNN returns the input's type: rounded as it is
            scope.lines.append(f"{name} = {_rounded(node, name)};")
        scope.memo[node.vid] = name
        return name

    def operand(self, a: Use | Const, consumer: Shape, scope: _Scope) -> str:
        if isinstance(a, Const):
            return float_literal(a.value)
        if a.vid in self.nodes and not (a.strided or a.trans):
            return self.value(a.vid, scope)
        if a.vid in self.nodes or a.vid in self.graph.recomputed:
            return self.inline(a, consumer, scope)
        arg = self.arg_of[a.vid]
        if a.strided or a.trans or not (arg.ctype.startswith("const float") or arg.reduced):
            return self.load_strided(a, consumer, scope)
        offset, identity = bcast_offset(scope.index, consumer, a.shape)
        key = (arg.name, offset)
        if key in scope.memo:
            return scope.memo[key]
        if identity and scope.lane:
            if arg.name not in scope.vec_loads:
                scope.vec_loads[arg.name] = f"q_{arg.name}{scope.sfx}"
            expr = f"reinterpret_cast<const float*>(&q_{arg.name}{scope.sfx})[l]"
        else:
            expr = arg.load(offset)
        name = f"x{len(scope.memo)}_{arg.name}"
        scope.lines.append(f"const float {name} = {expr};")
        scope.memo[key] = name
        return name

    # -- strided reads, recomputed values, gathers ---------------------------------------------
    def load_strided(self, a: Use, consumer: Shape, scope: _Scope) -> str:
        """A stored value read through its use's strides (permute, slice, expand), or a bool."""
        arg = self.arg_of[a.vid]
        offset, _ = index_expr(scope.index, consumer, a)
        key = (arg.name, offset)
        if key in scope.memo:
            return scope.memo[key]
        if arg.ctype.startswith("const bool"):
            expr = f"({arg.name}[{offset}] ? 1.f : 0.f)"
        elif arg.ctype.startswith("const long long"):
            expr = f"(float){arg.name}[{offset}]"
        else:
            expr = arg.load(offset)
        name = f"x{len(scope.memo)}_{arg.name}"
        scope.lines.append(f"const float {name} = {expr};")
        scope.memo[key] = name
        return name

    def inline(self, a: Use, consumer: Shape, scope: _Scope) -> str:
        """A value computed where it is read: a recomputed one (a mask, a filled tensor), or one
        of this kernel's read through a view (Swin's window reverse under its roll's cat).

        At another element than the scope's own, it is computed in a block of its own, with its
        own names and memo, so that nothing computed at the scope's element is reused there."""
        if a.strided or a.trans:
            at, _ = index_expr(scope.index, consumer, a)
        else:
            at, _ = bcast_offset(scope.index, consumer, a.shape)
        key = ("inline", a.vid, at)
        if key in scope.memo:
            return scope.memo[key]
        mine = self.tmp = self.tmp + 1
        idx, name = f"i{mine}", f"r{mine}"
        if at == scope.index:
            sub = _Scope(scope.space, scope.index, lines=scope.lines, memo=scope.memo)
            scope.lines.append(f"const float {name} = {self._elementwise(a.vid, sub)};")
        else:
            inner = [f"const idx_t {idx} = {at};"]
            sub = _Scope(scope.space, idx, lines=inner, memo={})
            inner.append(f"{name} = {self._elementwise(a.vid, sub)};")
            scope.lines += [f"float {name};", "{", *_indent(inner, 2), "}"]
        scope.memo[key] = name
        return name

    def _elementwise(self, vid: int, scope: _Scope) -> str:
        """An elementwise value at the scope's element: this kernel's own, or a recomputed one."""
        if vid in self.nodes:
            if self.nodes[vid].kind != "ew" or self.g.space[vid] == "red":
                raise Unsupported(f"internal: %{vid} read through a view in its own kernel")
            return self.value(vid, scope)
        node = self.graph.node(vid)
        assert node is not None
        args = [self.operand(x, node.shape, scope) for x in node.args]
        coords = _coords(scope.index, node.shape) if EW[node.fn].index else None
        return _rounded(node, ew_expr(node.fn, args, node.params, coords))

    def read_at(self, u: Use, shape: Shape, index: str, lines: list[str]) -> str:
        """The value of `u` (of logical `shape`) at flat `index`; its loads go to `lines`."""
        return self.operand(u, shape, _Scope("full", index, lines=lines, memo={}))

    def gather(self, node: Node, scope: _Scope) -> str:
        """Concatenation and padding: each output element reads one stored input element."""
        name = f"v{node.vid}"
        i = scope.index
        lines: list[str] = []
        if node.fn == "cat":
            dim = int(node.params["dim"])  # type: ignore[arg-type]
            sizes = [int(x) for x in node.params["sizes"]]  # type: ignore[union-attr]
            inner = numel(node.shape[dim + 1 :])
            total = node.shape[dim]
            c, o, r = f"c{node.vid}", f"o{node.vid}", f"r{node.vid}"
            lines += [
                f"float {name};",
                "{",
                f"  const idx_t {c} = ({i} / {inner}) % {total};"
                if inner != 1
                else f"  const idx_t {c} = {i} % {total};",
                f"  const idx_t {o} = {i} / {inner * total};",
                f"  const idx_t {r} = {i} % {inner};" if inner != 1 else f"  const idx_t {r} = 0;",
            ]
            start = 0
            for k, (u, size) in enumerate(zip(node.args, sizes, strict=True)):
                assert isinstance(u, Use)
                if k == 0:
                    lines.append(f"  if ({c} < {start + size}) {{")
                elif k < len(sizes) - 1:
                    lines.append(f"  }} else if ({c} < {start + size}) {{")
                else:
                    lines.append("  } else {")
                j = f"j{node.vid}_{k}"
                body = [f"const idx_t {j} = ({o} * {size} + ({c} - {start})) * {inner} + {r};"]
                v = self.read_at(u, u.shape, j, body)
                body.append(f"{name} = {v};")
                lines += _indent(body, 4)
                start += size
            lines += ["  }", "}"]
        elif node.fn == "pad":
            (u,) = node.args
            assert isinstance(u, Use)
            before = [int(x) for x in node.params["before"]]  # type: ignore[union-attr]
            value = float_literal(float(node.params["value"]))  # type: ignore[arg-type]
            out, inp = node.shape, u.shape
            lines += [f"float {name} = {value};", "{"]
            conds, terms = [], []
            stride_o = 1
            stride_i = 1
            for d in range(len(out) - 1, -1, -1):
                od = f"({i} / {stride_o}) % {out[d]}" if stride_o != 1 else f"{i} % {out[d]}"
                if d == 0:
                    od = f"{i} / {stride_o}" if stride_o != 1 else i
                cd = f"p{node.vid}_{d}"
                lines.append(f"  const idx_t {cd} = ({od}) - {before[d]};")
                if out[d] != inp[d] or before[d] != 0:
                    conds.append(f"{cd} >= 0 && {cd} < {inp[d]}")
                terms.append(f"{cd} * {stride_i}" if stride_i != 1 else cd)
                stride_o *= out[d]
                stride_i *= inp[d]
            j = f"j{node.vid}"
            body = [f"const idx_t {j} = {' + '.join(reversed(terms)) or '0'};"]
            v = self.read_at(u, u.shape, j, body)
            body.append(f"{name} = {v};")
            lines.append(f"  if ({' && '.join(conds) or 'true'}) {{")
            lines += _indent(body, 4)
            lines += ["  }", "}"]
        elif node.fn == "embedding":
            w, ids = node.args
            assert isinstance(w, Use) and isinstance(ids, Use)
            d = w.shape[1]
            e, row, j = f"e{node.vid}", f"w{node.vid}", f"j{node.vid}"
            at, _ = index_expr(e, ids.shape, ids)
            lines += [
                f"float {name};",
                "{",
                f"  const idx_t {e} = {i} / {d};",
                f"  const idx_t {row} = (idx_t){self.arg_of[ids.vid].name}[{at}];",
            ]
            body = [f"const idx_t {j} = {row} * {d} + {i} % {d};"]
            v = self.read_at(w, w.shape, j, body)
            body.append(f"{name} = {v};")
            lines += _indent(body, 2)
            lines.append("}")
        else:
            raise Unsupported(f"{node.origin}: gather {node.fn} has no code generator")
        scope.lines += lines
        scope.memo[node.vid] = name
        return name

    def index_store(self, sink: Node, scope: _Scope) -> list[str]:
        """`buffer.index_copy_(dim, index, source)` at element `f` of source: the element goes
        to the buffer's slot whose coordinate along `dim` is index[f's coordinate there]. An
        index outside the buffer writes nothing (PyTorch raises instead)."""
        src, index, target = sink.uses
        dim = int(sink.params["dim"])  # type: ignore[call-overload]
        value = self.value(src.vid, scope)
        shape, bshape = src.shape, target.shape
        sid = f"s{sink.vid}"
        terms, trail, slot = [], 1, ""
        bstrides = [math.prod(bshape[i + 1 :]) for i in range(len(bshape))]
        for i in reversed(range(len(shape))):
            coord = f"((f / {trail}) % {shape[i]})" if shape[i] != 1 else "0"
            trail *= shape[i]
            if i == dim:
                slot = self.arg_of[index.vid].load(coord)
                terms.append(f"{sid} * {bstrides[i]}LL")
            elif shape[i] != 1:
                terms.append(f"{coord} * {bstrides[i]}LL")
        addr = " + ".join(reversed(terms)) or "0"
        arg = self.arg_of[target.vid]
        return [
            f"{{  // {sink.origin or 'index_copy_'}: into slot index[.] along dim {dim}",
            f"  const long long {sid} = {slot};",
            f"  if ({sid} >= 0 && {sid} < {bshape[dim]}LL) {arg.store(f'({addr})', value)}",
            "}",
        ]

    # -- loops -----------------------------------------------------------------------------------
    def full_loop(self, lane: bool, push: list[tuple[str, int]], stores: list[int]) -> list[str]:
        """Body over one full-space element (or 4 lanes): push reduction inputs, store outputs."""
        pre, body, post = self.full_parts(lane, push, stores)
        return pre + body + post

    def full_parts(
        self,
        lane: bool,
        push: list[tuple[str, int]],
        stores: list[int],
        base: str = "f0",
        sfx: str = "",
    ) -> tuple[list[str], list[str], list[str]]:
        """(loads, compute, stores) of `full_loop`, so two iterations can issue loads first."""
        scope = _Scope("full", "f", lane=lane, sfx=sfx)
        for state, vid in push:
            if state in self.arg_index:
                idx = self.arg_index[state]
                scope.lines.append(f"{state}.push({self.value(vid, scope)}, (int)({idx}));")
            else:
                scope.lines.append(f"{state}.push({self.value(vid, scope)});")
        outs = []
        for vid in stores:
            arg = self.arg_of[vid]
            v = self.value(vid, scope)
            if lane:
                scope.lines.append(f"o_{arg.name}[l] = {v};")
            else:
                scope.lines.append(arg.store("f", v))
            outs.append(arg.name)
        for sink in self.g.sinks:
            if sink.kind == "index_store":  # scattered: one store per element, lanes or not
                scope.lines += self.index_store(sink, scope)
        if not lane:
            return [], [f"const idx_t f = {base};", *scope.lines], []
        pre = [
            f"const float4 {q} = {self.vector_load(name, base)};"
            for name, q in scope.vec_loads.items()
        ]
        pre += [f"float o_{name}{sfx}[4];" for name in outs]
        body = [
            "#pragma unroll",
            "for (int l = 0; l < 4; ++l) {",
            f"  const idx_t f = {base} + l;",
            *("  " + _rename_outs(s, outs, sfx) for s in scope.lines),
            "}",
        ]
        post = [
            f"st_st4({name} + {base}, {', '.join(f'o_{name}{sfx}[{i}]' for i in range(4))});"
            if self.arg_of_name[name].reduced
            else f"*reinterpret_cast<float4*>({name} + {base}) = "
            f"make_float4(o_{name}{sfx}[0], o_{name}{sfx}[1], o_{name}{sfx}[2], o_{name}{sfx}[3]);"
            for name in outs
        ]
        self.vector_loads = dict(scope.vec_loads)
        return pre, body, post

    def vector_load(self, name: str, base: str) -> str:
        """The four values of argument `name` from element `base` on, as a float4."""
        if self.arg_of_name[name].reduced:
            return f"st_ld4({name} + {base})"
        return f"*reinterpret_cast<const float4*>({name} + {base})"


def computes_convolution(g: Group) -> bool:
    """A group that computes a convolution in its loop body (direct_conv.py): its body loads
    element by element and loops over taps, so float4 lanes and unrolled trips only add
    registers (spills, at 1024 threads a block)."""
    return any(is_direct(n) for n in g.nodes)


def vectorisable(g: Group) -> bool:
    """Whether a pointwise group's loop may take four elements at a time."""
    return g.full_numel % 4 == 0 and not computes_convolution(g)


def _rename_outs(line: str, outs: list[str], sfx: str) -> str:
    for name in outs:
        line = line.replace(f"o_{name}[l]", f"o_{name}{sfx}[l]")
    return line


def _coords(index: str, shape: Shape) -> tuple[str, str]:
    """(row, col) of a flat index in the last two dims of `shape`."""
    cols = shape[-1] if shape else 1
    rows = shape[-2] if len(shape) >= 2 else 1
    col = f"({index} % {cols})"
    row = f"(({index} / {cols}) % {rows})" if rows != 1 else "0"
    return row, col


def _indent(lines: list[str], n: int) -> list[str]:
    return [(" " * n + s) if s else s for s in lines]


@dataclass(frozen=True)
class _Slots:
    """A reduction group's accumulators: one per distinct (kind, input, axes) reduction.

    The input is the whole Use: two slices of one tensor (offsets, strides) are different
    inputs. Every dict is keyed by the slot's name (s0, s1, ...), in the order slots are met,
    which is the order of their declarations, shared memory and workspace pieces.
    """

    nodes: dict[str, list[Node]]
    input: dict[str, Use]
    kind: dict[str, str]
    level: dict[str, int]  # the pass that accumulates the slot

    @classmethod
    def of(cls, g: Group) -> _Slots:
        keys: dict[tuple[object, ...], str] = {}
        slots = cls({}, {}, {}, {})
        for n in g.nodes:
            if n.kind != "reduce":
                continue
            x = n.args[0]
            assert isinstance(x, Use)
            # a sum that asks for it accumulates in double (templates' SumD)
            kind = "sum64" if n.fn == "sum" and n.params.get("acc") == "float64" else n.fn
            key = (kind, x, tuple(cast("tuple[int, ...]", n.params["axes"])))
            if key not in keys:
                s = f"s{len(keys)}"
                keys[key] = s
                slots.nodes[s] = []
                slots.input[s] = x
                slots.kind[s] = kind
                slots.level[s] = g.level[n.vid]
            slots.nodes[keys[key]].append(n)
        return slots

    def state(self, s: str) -> str:
        """The slot's C++ state type, whose id/push/comb the kernel calls."""
        return STATE_TYPES[self.kind[s]]


@dataclass(frozen=True)
class _Launch:
    """How a reduction kernel spreads over the GPU, chosen statically for ASSUMED_SMS.

    With `splits` > 1 the reduced dim is cut into `chunk`-long pieces, one block each, that
    leave partial states in a workspace for a later pass to combine: too few rows (or column
    blocks) would leave most SMs idle.
    """

    splits: int
    chunk: int
    tx: int = 0  # tile: threads along the contiguous kept dim
    ty: int = 0  # tile: threads along the reduced dim
    threads: int = 0  # row / chan: threads per block
    lanes: int = 0  # packed rows: threads per row, PACKED_THREADS // lanes rows per block

    @property
    def split(self) -> bool:
        return self.splits > 1


PACKED_MAX_ITEMS = 16  # rows of at most this many loads (vectors or scalars) are packed
HEAVY_THREADS = 256  # threads a block at most where each element is heavy (see _launch_shape)
HEAVY_WAVES = 8  # blocks an SM's worth of rows are split into where each element is heavy
# A thread's share of a row, in float4s, up to which its passes keep the row in registers
ROW_CACHE_VECTORS = 4
PACKED_THREADS = 256


def _launch_shape(lay: Layout, vec_ok: bool, heavy: bool = False) -> _Launch:
    """Threads per block and blocks per row, from the layout's sizes alone.

    `heavy`: each element costs tens of instructions (a convolution computed in the body), so
    the kernel is bound by issue, not memory: blocks of at most HEAVY_THREADS threads (more
    registers a thread before spilling) and rows split until about HEAVY_WAVES blocks per SM,
    which keeps the last wave's idle SMs a small share."""
    a, b, c = lay.dims
    tile = lay.kind == "tile"
    rlen, kept = lay.rlen, lay.kept
    most = HEAVY_THREADS if heavy else 1024
    want = (HEAVY_WAVES if heavy else 2) * ASSUMED_SMS
    # Few rows and long ones: split each row over S blocks (partial states in a workspace).
    splits = 1
    if not tile and kept < want:
        splits = max(1, min(-(-want // kept), rlen // SPLIT_MIN_ELEMS))
    chunk = rlen
    if splits > 1:
        chunk = -(-rlen // splits)
        chunk = -(-chunk // 4) * 4
        splits = -(-rlen // chunk)
    if not tile:
        items = chunk // 4 if vec_ok else chunk
        if lay.kind == "row" and splits == 1 and items <= PACKED_MAX_ITEMS and not heavy:
            # Short rows (GroupNorm's 64-channel groups): a warp per row would leave lanes
            # idle and pay a block barrier per row; a few lanes per row, many rows per block.
            lanes = 1
            while lanes < items:
                lanes *= 2
            return _Launch(1, chunk, threads=PACKED_THREADS, lanes=max(lanes, 2))
        threads = 32
        while threads < most and threads * 4 < items:
            threads *= 2
        return _Launch(splits, chunk, threads=threads)
    # Wider rows of threads read longer contiguous runs, while there are blocks enough.
    tx = 32
    while tx < 128 and c > tx and -(-c // (2 * tx)) * a >= 2 * ASSUMED_SMS:
        tx *= 2
    ty = 1
    while tx * ty < most and ty * 8 < b:
        ty *= 2
    # Few column blocks and a long reduced dim: split it over S blocks too.
    blocks = -(-c // tx) * min(a, 65535)
    if blocks < want and b >= 2048:
        splits = max(1, min(-(-want // blocks), b // (ty * 64)))
        if splits > 1:
            chunk = -(-b // splits)
            splits = -(-b // chunk)
    return _Launch(splits, chunk, tx, ty)


class _ReductionKernel:
    """The kernel and launcher of one reduction group, built in stages.

    The stages share the slots, the launch shape and one row-level scope (`scope`: values
    computed once per kept row or column, such as a norm's rsqrt), and they must run in order:
    each emits into that scope and registers what the next one reads.
    """

    def __init__(self, cg: Codegen, g: Group, gen: _GroupGen, args: list[Arg]) -> None:
        lay = g.layout
        assert lay is not None
        self.cg, self.g, self.gen, self.args, self.lay = cg, g, gen, args, lay
        self.tile = lay.kind == "tile"
        self.slots = _Slots.of(g)
        for s, kind in self.slots.kind.items():
            if kind in ("argmax", "argmin"):
                if lay.kind == "chan":
                    raise Unsupported("argmax/argmin over several dims")
                gen.arg_index[s] = "(f / K2) % R" if self.tile else "f - row * RLEN"
        self.scope = _Scope("red", "kept")
        gen.red_scope = self.scope
        _, b, c = lay.dims
        self.vec_ok = (lay.kind == "row" and b % 4 == 0) or (lay.kind == "chan" and c % 4 == 0)
        # a convolution computed per element (direct_conv.py): no float4 lanes, short blocks
        self.heavy = computes_convolution(g)
        self.vec_ok = self.vec_ok and not self.heavy
        self.shape = _launch_shape(lay, self.vec_ok, heavy=self.heavy)
        # Reduced values (v<vid>) declared so far, visible to the later passes and the outputs.
        self.field_memo: dict[object, str] = {}
        self.row_cache: set[str] = set()  # inputs whose row vectors an earlier pass cached

    def source(self) -> str:
        """The kernel and its launcher: the body (accumulation passes, then the outputs) is
        built alike for every layout; only the kernel's head and its launches differ."""
        body: list[str] = []
        for p in range(1, self.g.passes + 1):
            body += self.accumulate_pass(p)
        body += self.final_pass()
        if self.tile:
            return self.tile_kernel(body)
        if self.shape.split:
            return self.split_row_kernel(body)
        return self.row_kernel(body)

    # -- the loop over a thread's elements -----------------------------------------------------
    def loop(self, push: list[tuple[str, int]], stores: list[int]) -> list[str]:
        """A thread's walk over its elements of the reduced dim (for every kept row it owns).

        Each loop is unrolled by hand into a main loop that takes several rows (tile) or
        vectors (row) per step, each in its own block, then a remainder loop: with
        `#pragma unroll` alone nvcc keeps an exit test between the copies (the trip count is
        not known), so only one load is in flight per thread. The order in which a thread
        accumulates its elements is unchanged.
        """
        if self.tile:
            return self._tile_loop(push, stores)
        lane, width = ("lane", "LANES") if self.shape.lanes else ("threadIdx.x", "blockDim.x")
        out = []
        if self.vec_ok and self._row_vectors():
            out += self._cached_loop(push, stores)
            out.append("} else {")
        elif self.vec_ok:
            body = self.gen.full_loop(True, push, stores)
            out += [
                "if constexpr (VEC) {",
                *self._unrolled(f"J0 + {lane} * 4", f"(idx_t){width} * 4", 2, body, 2),
                "} else {",
            ]
        else:
            out.append("{")
        body = self.gen.full_loop(False, push, stores)
        # Four elements a trip keep four loads in flight; a convolution computed in the body
        # (its own loop over taps) gains nothing from that and would spill registers.
        ways = 1 if self.heavy else 4
        out += [*self._unrolled(f"J0 + {lane}", f"(idx_t){width}", ways, body, 2), "}"]
        return out

    def _row_vectors(self) -> int:
        """float4s per thread and row where a thread's share of a row is a few vectors (at most
        ROW_CACHE_VECTORS): then the passes walk them in a fully unrolled loop and keep what
        they load in registers for the later passes, instead of reading the row again. 0 where
        the share is longer, or where a reduction pass is split over blocks."""
        if self.tile or self.shape.split or not self.vec_ok:
            return 0
        per = self.shape.lanes or self.shape.threads
        n = -(-(self.shape.chunk // 4) // per)
        return n if n <= ROW_CACHE_VECTORS else 0

    def _cached_loop(self, push: list[tuple[str, int]], stores: list[int]) -> list[str]:
        """The float4 path over a thread's few vectors of the row, unrolled by the compiler
        (the count is a constant), with each input's vectors cached in registers (c_<arg>[i]):
        the first pass that reads an input loads it, the later ones reuse it. Inputs past the
        register budget are loaded where they are read, as the plain loop does."""
        n = self._row_vectors()
        lane, width = ("lane", "LANES") if self.shape.lanes else ("threadIdx.x", "THREADS")
        pre, body, post = self.gen.full_parts(True, push, stores)
        vectors = self.gen.vector_loads
        decl: list[str] = []
        loads: list[str] = []
        for name, q in vectors.items():
            expr = self.gen.vector_load(name, "f0")
            if name in self.row_cache:
                loads.append(f"const float4 {q} = c_{name}[i];")
            elif len(self.row_cache) * n + n <= ROW_CACHE_VECTORS * 2:
                self.row_cache.add(name)
                decl.append(f"float4 c_{name}[{n}];  // this thread's vectors of the row")
                loads += [f"c_{name}[i] = {expr};", f"const float4 {q} = c_{name}[i];"]
            else:
                loads.append(f"const float4 {q} = {expr};")
        loads += pre[len(vectors) :]  # the outputs' staging registers
        threads = [] if self.shape.lanes else [f"  constexpr idx_t THREADS = {self.shape.threads};"]
        return [
            *decl,
            "if constexpr (VEC) {",
            *threads,
            "  #pragma unroll",
            f"  for (int i = 0; i < {n}; ++i) {{",
            f"    const idx_t j = J0 + ({lane} + (idx_t)i * {width}) * 4;",
            "    if (j < J1) {",
            f"      const idx_t f0 = {self._addr('j')};",
            *_indent(loads + body + post, 6),
            "    }",
            "  }",
        ]

    def _tile_loop(self, push: list[tuple[str, int]], stores: list[int]) -> list[str]:
        """Tile layout: threads step along the reduced dim TY rows apart, four rows a step."""
        body = self.gen.full_loop(False, push, stores)
        out = ["if (valid) {", "  idx_t r = R0 + threadIdx.y;"]
        out += ["  for (; r + 3 * TY < R1; r += 4 * TY) {"]
        for u in range(4):
            row = "r" if u == 0 else f"r + {u} * TY"
            out += [
                "    {",
                f"      const idx_t f0 = (k1 * R + {row}) * K2 + k2;",
                *_indent(body, 6),
                "    }",
            ]
        out += [
            "  }",
            "  for (; r < R1; r += TY) {",
            "    const idx_t f0 = (k1 * R + r) * K2 + k2;",
            *_indent(body, 4),
            "  }",
            "}",
        ]
        return out

    def _addr(self, j: str) -> str:
        """Flat input index of element `j` of the current row (row) or channel (chan)."""
        if self.lay.kind == "row":
            return f"row * RLEN + {j}"
        return f"((({j}) / R2) * K + row) * R2 + (({j}) % R2)"

    def _unrolled(self, first: str, step: str, ways: int, body: list[str], ind: int) -> list[str]:
        """Row / chan layout: `ways` copies of `body` per trip over [J0, J1), then the rest."""
        pad = " " * ind
        if ways == 1:
            return [
                f"{pad}for (idx_t j = {first}; j < J1; j += {step}) {{",
                f"{pad}  const idx_t f0 = {self._addr('j')};",
                *_indent(body, ind + 2),
                f"{pad}}}",
            ]
        lines = [f"{pad}idx_t j = {first};"]
        lines.append(f"{pad}for (; j + {ways - 1} * {step} < J1; j += {ways} * {step}) {{")
        for u in range(ways):
            jj = "j" if u == 0 else f"j + {u} * {step}"
            lines += [
                f"{pad}  {{",
                f"{pad}    const idx_t f0 = {self._addr(jj)};",
                *_indent(body, ind + 4),
                f"{pad}  }}",
            ]
        lines += [
            f"{pad}}}",
            f"{pad}for (; j < J1; j += {step}) {{",
            f"{pad}  const idx_t f0 = {self._addr('j')};",
            *_indent(body, ind + 2),
            f"{pad}}}",
        ]
        return lines

    def early_outputs(self) -> list[int]:
        """Full-size outputs that need no reduced value (level 0): stored by the first pass,
        which computes them anyway, so the final pass does not read their inputs (or compute a
        convolution) again."""
        g = self.g
        return [v for v in g.outputs if g.space[v] == "full" and g.level.get(v, 0) == 0]

    def _push_loop(self, push: list[tuple[str, int]], stores: list[int]) -> list[str]:
        """Reduction inputs that are group values are emitted; external ones are loaded; the
        first pass also stores `stores`."""
        gen = self.gen
        fixed: list[tuple[str, int]] = []
        for s, vid in push:
            if vid >= 0:
                fixed.append((s, vid))
                continue
            # An external tensor reduced directly: make a pseudo identity node.
            u = self.slots.input[s]
            pseudo = Node(-(len(gen.nodes) + 1000), "ew", "add", [u, Const(0.0)], u.shape)
            pseudo.fn = "identity"
            gen.nodes[pseudo.vid] = pseudo
            gen.g.space[pseudo.vid] = "full"
            fixed.append((s, pseudo.vid))
        return self.loop(fixed, stores)

    # -- passes --------------------------------------------------------------------------------
    def allreduce(self, s: str) -> str:
        """Combine the block's per-thread states of slot `s` into every thread's copy."""
        st = self.slots.state(s)
        if self.tile:
            return f"{s} = column_allreduce<{st}, TY, TX>({s}, sm_{s});"
        if self.shape.lanes:
            return f"{s} = lanes_allreduce<{st}, LANES>({s});"
        return f"{s} = block_allreduce<{st}>({s}, sm_{s});"

    def accumulate_pass(self, p: int) -> list[str]:
        """Pass `p` accumulates the slots whose inputs need the reduced values of pass p - 1
        (a norm's variance needs its mean, softmax's sum of exponentials its max)."""
        slots, gen, scope = self.slots, self.gen, self.scope
        mine = [s for s in slots.kind if slots.level[s] == p]
        scope.lines = []
        scope.memo = dict(self.field_memo)
        decl = [f"{slots.state(s)} {s} = {slots.state(s)}::id();" for s in mine]
        push = [(s, slots.input[s].vid if slots.input[s].vid in gen.nodes else -1) for s in mine]
        loop_lines = self._push_loop(push, self.early_outputs() if p == 1 else [])
        body = [f"// pass {p}: " + ", ".join(f"{slots.kind[s]}" for s in mine), *decl]
        if self.shape.split:
            body += self._split_pass(p, mine, loop_lines)
        else:
            body += scope.lines + loop_lines + [self.allreduce(s) for s in mine]
            # Every pass shares one scope here: what this pass declared at row level (a
            # norm's rsqrt) stays visible to the later passes, so it is not declared again.
            self.field_memo.update(scope.memo)
        for s in mine:
            body += self._read_fields(s)
        return body

    def _split_pass(self, p: int, mine: list[str], loop_lines: list[str]) -> list[str]:
        """A split pass runs in two launches: launch p leaves each block's partial state in
        the workspace, and every later launch combines the row's S partials before going on."""
        who = "threadIdx.y == 0 && valid" if self.tile else "threadIdx.x == 0"
        write = [f"if ({who}) ws_{s}[kept * S + part] = {s};" for s in mine]
        body = [
            f"if constexpr (PASS == {p}) {{",
            *_indent(self.scope.lines + loop_lines + [self.allreduce(s) for s in mine], 2),
            *_indent(write, 2),
            "}",
            f"if constexpr (PASS > {p}) {{  // combine the row's partial states",
        ]
        for s in mine:
            st = self.slots.state(s)
            if self.tile:  # each thread owns a column: it reads the S partials itself
                body.append(
                    f"  if (valid) for (int q = 0; q < S; ++q) "
                    f"{s} = {st}::comb({s}, ws_{s}[kept * S + q]);"
                )
            else:
                body += [
                    f"  for (int q = threadIdx.x; q < S; q += blockDim.x) "
                    f"{s} = {st}::comb({s}, ws_{s}[kept * S + q]);",
                    "  " + self.allreduce(s),
                ]
        body.append("}")
        return body

    def _read_fields(self, s: str) -> list[str]:
        """Name the values the group's reduce nodes take from slot `s` (v<vid>)."""
        lines = []
        for n in self.slots.nodes[s]:
            fieldname = str(n.params["field"])
            expr = {
                "sum": f"{s}.v",
                "max": f"{s}.v" if self.slots.kind[s] != "softmax" else f"{s}.m",
                "min": f"{s}.v",
                "mean": f"{s}.mean",
                "var": f"{s}.var()",
                "sumexp": f"{s}.s",
                "index": f"(long long){s}.i",
            }[fieldname]
            ctype = "long long" if fieldname == "index" else "float"
            lines.append(f"const {ctype} v{n.vid} = {expr};")
            self.field_memo[n.vid] = f"v{n.vid}"
        return lines

    # -- outputs -------------------------------------------------------------------------------
    def final_pass(self) -> list[str]:
        """The last walk: full-size outputs per element, then one thread stores the row's
        reduced outputs and running statistics."""
        g, gen, scope = self.g, self.gen, self.scope
        early = set(self.early_outputs())
        full_out = [v for v in g.outputs if g.space[v] == "full" and v not in early]
        red_out = [v for v in g.outputs if g.space[v] == "red"]
        scope.lines = []
        scope.memo = dict(self.field_memo)
        final = self.loop([], full_out) if full_out else []
        pre_final = scope.lines
        scope.lines = []
        if self.tile:
            guard = "threadIdx.y == 0 && valid" + (" && part == 0" if self.shape.split else "")
        elif self.shape.split:
            guard = "chunk == 0 && threadIdx.x == 0"
        elif self.shape.lanes:
            guard = "lane == 0 && live"
        else:
            guard = "threadIdx.x == 0"
        tail: list[str] = []
        for vid in red_out:
            v = gen.value(vid, scope)
            arg = gen.arg_of[vid]
            tail.append(f"if ({guard}) {arg.store('kept', v)}")
        for s in g.sinks:
            tail += self._running_stats(s, guard)
        final_lines = [*pre_final, *scope.lines, *final, *tail]
        if self.shape.split:
            return [
                "// final pass: outputs",
                f"if constexpr (PASS == {g.passes + 1}) {{",
                *_indent(final_lines, 2),
                "}",
            ]
        return ["// final pass: outputs", *final_lines]

    def _running_stats(self, sink: Node, guard: str) -> list[str]:
        """A batch norm in training also updates its running mean and variance buffers."""
        gen = self.gen
        mean, var, rm, rv, nbt = sink.uses
        mv, vv = gen.value(mean.vid, self.scope), gen.value(var.vid, self.scope)
        cnt = int(cast(int, sink.params["count"]))
        unbias = cnt / (cnt - 1) if cnt > 1 else 1.0
        arm, arv = gen.arg_of[rm.vid], gen.arg_of[rv.vid]
        pn = gen.arg_of[nbt.vid].name
        if sink.params["momentum"] is None:
            # Cumulative average: factor 1/(batches seen, this one included). The count is
            # bumped by a separate launch after this kernel, so every block reads the old one.
            mom, keep, bump = f"(1.f / (float)({pn}[0] + 1))", "", ""
        else:
            m = float(sink.params["momentum"])  # type: ignore[arg-type]
            mom, keep = float_literal(m), float_literal(1 - m)
            bump = f"  if (kept == 0) {pn}[0] += 1;"
        return [
            f"if ({guard}) {{  // running statistics, as {sink.origin} updates them in training",
            f"  const float mom = {mom};",
            f"  const float keep = {keep or '1.f - mom'};",
            # buffers in the model's type (bf16/fp16 after .to()): updated in float
            "  " + arm.store("kept", f"keep * {arm.load('kept')} + mom * {mv}"),
            "  "
            + arv.store(
                "kept", f"keep * {arv.load('kept')} + mom * ({vv} * {float_literal(unbias)})"
            ),
            *([bump] if bump else []),
            "}",
        ]

    # -- kernel heads and launches -------------------------------------------------------------
    def _smem(self) -> list[str]:
        """Shared memory for each slot's block-wide combine."""
        dims = "[TY][TX];" if self.tile else "[32];"
        return [f"__shared__ {self.slots.state(s)} sm_{s}" + dims for s in self.slots.kind]

    def _workspace(self) -> list[str]:
        """Pointers to each slot's partial states (kept x S) in one workspace buffer."""
        lines = []
        offset = 0
        for s in self.slots.kind:
            st = self.slots.state(s)
            lines.append(f"  {st}* __restrict__ ws_{s} = reinterpret_cast<{st}*>(ws + {offset});")
            offset += -(-STATE_BYTES[st] * self.lay.kept * self.shape.splits // 16) * 16
        self.cg.ws_bytes[self.g.gid] = offset
        return lines

    def _signature(self) -> str:
        return self.cg._signature(self.g.name, self.args)

    def _names(self) -> str:
        """The kernel's arguments as its launcher passes them on."""
        return ", ".join(x.name for x in self.args)

    def _finish(self, head: list[str], body: list[str], args: list[Arg], launch: list[str]) -> str:
        """Close the kernel's row loop and append its C launcher."""
        src = "\n".join([*head, *_indent(body, 4), "  }", "}"])
        return src + "\n\n" + self.cg._launcher(self.g, args, launch)

    def tile_kernel(self, body: list[str]) -> str:
        """Tile layout: a TY x TX block per column block of K2, looping over K1 (grid.y)."""
        g, sh, split = self.g, self.shape, self.shape.split
        a, b, c = self.lay.dims
        sig, names = self._signature(), self._names()
        ws_lines = self._workspace() if split else []
        head = [
            "template <int PASS, bool VEC>" if split else "template <bool VEC>",
            f"__global__ void __launch_bounds__({sh.tx * sh.ty}) {g.name}_kernel({sig}"
            + (", unsigned char* __restrict__ ws) {" if split else ") {"),
            f"  typedef {self.gen.idx_t} idx_t;",
            f"  constexpr idx_t K1 = {a}, R = {b}, K2 = {c};",
            f"  constexpr int TY = {sh.ty}, TX = {sh.tx};",
            *(
                [
                    f"  constexpr idx_t S = {sh.splits}, RCH = {sh.chunk};",
                    "  const idx_t part = blockIdx.z;",
                    "  const idx_t R0 = part * RCH, R1 = (R0 + RCH < R) ? R0 + RCH : R;",
                ]
                if split
                else ["  constexpr idx_t R0 = 0, R1 = R;"]
            ),
            *_indent(self._smem(), 2),
            *ws_lines,
            "  const idx_t k2 = (idx_t)blockIdx.x * TX + threadIdx.x;",
            "  const bool valid = k2 < K2;",
            "  for (idx_t k1 = blockIdx.y; k1 < K1; k1 += gridDim.y) {",
            "    const idx_t kept = k1 * K2 + k2;",
            "    (void)kept;",
        ]
        grid = f"dim3((unsigned)({-(-c // sh.tx)}), (unsigned)({min(a, 65535)}), {sh.splits})"
        block = f"dim3({sh.tx}, {sh.ty})"
        args = self.args
        if split:
            launch = [
                f"{g.name}_kernel<{p}, false><<<{grid}, {block}, 0, stream>>>({names}, ws);"
                for p in range(1, g.passes + 2)
            ]
            args = [*args, Arg("ws", -1, "unsigned char*", "ws")]
        else:
            launch = [f"{g.name}_kernel<false><<<{grid}, {block}, 0, stream>>>({names});"]
        return self._finish(head, body, args, launch)

    def _consts(self) -> str:
        """Row / chan kernels' compile-time sizes."""
        _, b, c = self.lay.dims
        if self.lay.kind == "row":
            return f"  constexpr idx_t K = {self.lay.kept}, RLEN = {self.lay.rlen};"
        return f"  constexpr idx_t K = {b}, R2 = {c}, RLEN = {self.lay.rlen};"

    def split_row_kernel(self, body: list[str]) -> str:
        """Row / chan layout split over S blocks per row: one launch per pass, then outputs."""
        g, sh = self.g, self.shape
        sig, names = self._signature(), self._names()
        head = [
            "template <int PASS, bool VEC>",
            f"__global__ void __launch_bounds__({sh.threads}) {g.name}_kernel({sig}, "
            "unsigned char* __restrict__ ws) {",
            f"  typedef {self.gen.idx_t} idx_t;",
            self._consts(),
            f"  constexpr idx_t S = {sh.splits}, CH = {sh.chunk};",
            *_indent(self._smem(), 2),
            *self._workspace(),
            "  const idx_t row = blockIdx.y, chunk = blockIdx.x, kept = row, part = chunk;",
            "  const idx_t J0 = chunk * CH, J1 = (J0 + CH < RLEN) ? J0 + CH : RLEN;",
            "  (void)kept;",
            "  {",
        ]
        grid, threads = f"dim3({sh.splits}, {self.lay.kept})", sh.threads
        launch = []
        for p in range(1, g.passes + 2):
            launch += [
                f"if (vec && {str(self.vec_ok).lower()}) {{",
                f"  {g.name}_kernel<{p}, true><<<{grid}, {threads}, 0, stream>>>({names}, ws);",
                "} else {",
                f"  {g.name}_kernel<{p}, false><<<{grid}, {threads}, 0, stream>>>({names}, ws);",
                "}",
            ]
        args_ws = [*self.args, Arg("ws", -1, "unsigned char*", "ws")]
        return self._finish(head, body, args_ws, launch)

    def _launches(self, grid: str, threads: int, names: str) -> list[str]:
        """The launcher's two launches: the float4 kernel where pointers allow, else scalar."""
        name = self.g.name
        return [
            f"if (vec && {str(self.vec_ok).lower()}) {{",
            f"  {name}_kernel<true><<<{grid}, {threads}, 0, stream>>>({names});",
            "} else {",
            f"  {name}_kernel<false><<<{grid}, {threads}, 0, stream>>>({names});",
            "}",
        ]

    def row_kernel(self, body: list[str]) -> str:
        """Row / chan layout, one block per row (or channel), grid-striding over the rows."""
        if self.shape.lanes:
            return self.packed_row_kernel(body)
        g, threads = self.g, self.shape.threads
        sig, names = self._signature(), self._names()
        head = [
            "template <bool VEC>",
            f"__global__ void __launch_bounds__({threads}) {g.name}_kernel({sig}) {{",
            f"  typedef {self.gen.idx_t} idx_t;",
            self._consts(),
            *_indent(self._smem(), 2),
            "  for (idx_t row = blockIdx.x; row < K; row += gridDim.x) {",
            "    const idx_t kept = row;",
            "    constexpr idx_t J0 = 0, J1 = RLEN;",
            "    (void)kept;",
        ]
        per_sm = max(1, min(32, 2048 // threads))
        grid = f"stitch_grid({self.lay.kept} * {threads}LL, {threads}, {per_sm})"
        return self._finish(head, body, self.args, self._launches(grid, threads, names))

    def packed_row_kernel(self, body: list[str]) -> str:
        """Short rows: LANES threads per row, RPB rows per block, combined by shuffles. A
        group past the last row walks no elements (every lane must still take part in the
        shuffles), and `live` keeps it from storing the row's reduced outputs."""
        g, threads, lanes = self.g, self.shape.threads, self.shape.lanes
        sig, names = self._signature(), self._names()
        head = [
            "template <bool VEC>",
            f"__global__ void __launch_bounds__({threads}) {g.name}_kernel({sig}) {{",
            f"  typedef {self.gen.idx_t} idx_t;",
            self._consts(),
            f"  constexpr int LANES = {lanes}, RPB = {threads // lanes};",
            "  const int lane = threadIdx.x % LANES;",
            "  for (idx_t row0 = (idx_t)blockIdx.x * RPB; row0 < K; "
            "row0 += (idx_t)gridDim.x * RPB) {",
            "    const bool live = row0 + (idx_t)(threadIdx.x / LANES) < K;",
            "    const idx_t row = live ? row0 + (idx_t)(threadIdx.x / LANES) : K - 1;",
            "    const idx_t kept = row;",
            "    const idx_t J0 = 0, J1 = live ? RLEN : 0;  // a dead group walks nothing",
            "    (void)kept;",
        ]
        grid = f"stitch_grid({self.lay.kept} * {lanes}LL, {threads}, 8)"
        return self._finish(head, body, self.args, self._launches(grid, threads, names))


class Codegen:
    def __init__(self, graph: Graph, groups: list[Group]) -> None:
        self.graph = graph
        self.groups = groups
        self.owner = {n.vid: g for g in groups for n in g.nodes}
        self.kernels: list[GroupKernel] = []
        self.uses_cublas = any(g.kind in ("gemm", "rnn") for g in groups)
        self.ws_bytes: dict[int, int] = {}  # gid -> workspace bytes of split reductions

    def shape(self, vid: int) -> Shape:
        return self.graph.shape_of(vid)

    # -- args --------------------------------------------------------------------------------
    def _args(self, g: Group) -> list[Arg]:
        args: list[Arg] = []
        seen: dict[int, Arg] = {}
        inout = set()
        for s in g.sinks:
            for u in s.uses[2:]:
                inout.add(u.vid)
        for n in g.nodes + g.sinks:
            for u in reads(self.graph, n, self.graph.recomputed):
                if (u.vid in self.owner and self.owner[u.vid] is g) or u.vid in seen:
                    continue
                if u.vid in inout:
                    leaf = self.graph.leaves[u.vid]
                    ctype = storage_ctype(leaf.dtype) + "*"
                    a = Arg(f"io{len(seen)}", u.vid, ctype, "inout")
                else:
                    a = Arg(f"in{len(seen)}", u.vid, _in_ctype(self.graph, u.vid), "in")
                seen[u.vid] = a
                args.append(a)
        for k, vid in enumerate(g.outputs):
            node = next(n for n in g.nodes if n.vid == vid)
            ctype = storage_ctype(node.dtype if node.dtype != "bool" else "float32") + "*"
            args.append(Arg(f"out{k}", vid, f"{ctype} __restrict__", "out"))
        return args

    # -- kernels -----------------------------------------------------------------------------
    def kernel(self, g: Group) -> GroupKernel:
        args = self._args(g)
        arg_of = {a.vid: a for a in args}
        gen = _GroupGen(self.graph, g, arg_of)
        ops = [n.origin or n.fn for n in g.nodes + g.sinks if n.kind != "bn_update"]
        uniq = list(dict.fromkeys(ops))
        comment = ", ".join(uniq)
        if g.parts:
            src = self._combined(g, args, arg_of)
        elif g.kind == "pointwise":
            src = self._pointwise(g, gen, args)
        else:
            src = self._reduction(g, gen, args)
        if g.gid in self.ws_bytes:
            args = [*args, Arg("ws", -1, "unsigned char*", "ws", self.ws_bytes[g.gid])]
        return GroupKernel(g, g.name, args, src, comment)

    def _signature(self, name: str, args: list[Arg]) -> str:
        return ", ".join(f"{a.ctype} {a.name}" for a in args)

    def _launcher(self, g: Group, args: list[Arg], launch: list[str]) -> str:
        params = ", ".join(f"{a.ctype.replace(' __restrict__', '')} {a.name}" for a in args)
        ptrs = " && ".join(f"stitch_aligned16({a.name})" for a in args) or "true"
        counts = [
            next(a.name for a in args if a.vid == s.uses[4].vid)
            for s in g.sinks
            if s.kind == "bn_update" and s.params["momentum"] is None
        ]
        bump = [f"stitch_count_batch<<<1, 1, 0, stream>>>({n});" for n in counts]
        lines = [
            f'extern "C" int {g.name}({params}, cudaStream_t stream) {{',
            f"  const bool vec = {ptrs};",
            *_indent(launch, 2),
            *_indent(bump, 2),
            "  return (int)cudaGetLastError();",
            "}",
        ]
        return "\n".join(lines)

    def _pointwise(self, g: Group, gen: _GroupGen, args: list[Arg]) -> str:
        sig = self._signature(g.name, args)
        names = ", ".join(a.name for a in args)
        n, vec_ok = g.full_numel, vectorisable(g)
        lines = [
            "template <bool VEC>",
            f"__global__ void __launch_bounds__(256) {g.name}_kernel({sig}) {{",
            *self._pointwise_body(g, gen, "gridDim.x", "blockIdx.x"),
            "}",
        ]
        launch = [
            f"if (vec && {str(vec_ok).lower()}) {{",
            f"  {g.name}_kernel<true><<<stitch_grid({-(-n // 8)}, 256, 8), 256, 0, stream>>>"
            f"({names});",
            "} else {",
            f"  {g.name}_kernel<false><<<stitch_grid({n}, 256, 8), 256, 0, stream>>>({names});",
            "}",
        ]
        return "\n".join(lines) + "\n\n" + self._launcher(g, args, launch)

    def _combined(self, g: Group, args: list[Arg], arg_of: dict[int, Arg]) -> str:
        """Independent pointwise kernels as one launch: block ranges [b{k-1}, b{k}) run part k,
        each over its own elements with its own vector path, grid-stride within its range."""
        sig = self._signature(g.name, args)
        names = ", ".join(a.name for a in args)
        ends = [f"b{k}" for k in range(len(g.parts))]
        lines = [
            "template <bool VEC>",
            f"__global__ void __launch_bounds__(256) {g.name}_kernel({sig}, "
            + ", ".join(f"int {b}" for b in ends)
            + ") {",
        ]
        launch = []
        for k, part in enumerate(g.parts):
            gen = _GroupGen(self.graph, part, arg_of)
            lo = f"b{k - 1}" if k else "0"
            branch = "if" if k == 0 else "} else if"
            lines.append(f"  {branch} (blockIdx.x < b{k}) {{  // {part.name}")
            lines += _indent(
                self._pointwise_body(part, gen, f"(b{k} - {lo})", f"(blockIdx.x - {lo})"), 2
            )
            n, vec_ok = part.full_numel, vectorisable(part)
            grid = f"stitch_grid({n}, 256, 8)"
            if vec_ok:
                grid = f"(vec ? stitch_grid({-(-n // 8)}, 256, 8) : {grid})"
            launch.append(f"const int b{k} = {lo} + {grid};")
        lines += ["  }", "}"]
        call = f"<<<{ends[-1]}, 256, 0, stream>>>({names}, {', '.join(ends)});"
        launch += [
            f"if (vec) {g.name}_kernel<true>{call}",
            f"else {g.name}_kernel<false>{call}",
        ]
        return "\n".join(lines) + "\n\n" + self._launcher(g, args, launch)

    def _pointwise_body(self, g: Group, gen: _GroupGen, grid: str, block: str) -> list[str]:
        """A pointwise kernel's grid-stride loops over `g`'s elements, for a grid of `grid`
        blocks of which this is block `block` (the whole launch's, or a combined one's range)."""
        n = g.full_numel
        stores = list(g.outputs)
        vec_ok = vectorisable(g)
        scalar = gen.full_loop(False, [], stores)
        # Two float4 iterations per trip: both loads are issued before either result is used.
        pre_a, body_a, post_a = (
            gen.full_parts(True, [], stores, "f0", "") if vec_ok else ([], [], [])
        )
        pre_b, body_b, post_b = (
            gen.full_parts(True, [], stores, "f1", "b") if vec_ok else ([], [], [])
        )
        post_b_guarded = ["if (two) {", *_indent(post_b, 2), "}"] if post_b else []
        vec = pre_a + pre_b + body_a + post_a + body_b + post_b_guarded
        lines = [
            f"  typedef {gen.idx_t} idx_t;",
            f"  const idx_t n = {n};",
            f"  const idx_t stride = (idx_t){grid} * blockDim.x;",
            f"  const idx_t start = (idx_t){block} * blockDim.x + threadIdx.x;",
        ]
        if vec_ok:
            lines += [
                "  if constexpr (VEC) {",
                "    const idx_t n4 = n / 4;",
                "    for (idx_t v = start; v < n4; v += 2 * stride) {",
                "      const idx_t f0 = v * 4;",
                "      const bool two = v + stride < n4;",
                "      const idx_t f1 = two ? (v + stride) * 4 : f0;  // in bounds either way",
                *_indent(vec, 6),
                "    }",
                "  } else {",
            ]
        else:
            lines.append("  {")
        lines += [
            "    #pragma unroll 4",
            "    for (idx_t f0 = start; f0 < n; f0 += stride) {",
            *_indent(scalar, 6),
            "    }",
            "  }",
        ]
        return lines

    def _reduction(self, g: Group, gen: _GroupGen, args: list[Arg]) -> str:
        return _ReductionKernel(self, g, gen, args).source()

    # -- GEMM ----------------------------------------------------------------------------------
    def gemm(self, g: Group) -> GroupKernel:
        node = g.nodes[0]
        a, b = node.uses[:2]
        bias = node.uses[2] if len(node.uses) > 2 else None
        epilogue = str(node.params.get("epilogue", ""))
        batch = int(node.params.get("batch", 1))  # type: ignore[arg-type]
        m, k = a.shape[-2], a.shape[-1]
        n = b.shape[-1]
        # Row-major C = A B is column-major C^T = B^T A^T: pass B first.
        tb, ldb, sb, offb = blas_operand(b)
        ta, lda, sa, offa = blas_operand(a)
        op_b = "CUBLAS_OP_T" if tb else "CUBLAS_OP_N"
        op_a = "CUBLAS_OP_T" if ta else "CUBLAS_OP_N"
        pa = f"a + {offa}" if offa else "a"
        pb = f"b + {offb}" if offb else "b"
        what_views = " (strided operands)" if a.strided or b.strided else ""
        ab = stored_dtype(self.graph, a.vid)
        if stored_dtype(self.graph, b.vid) != ab or ab not in BLAS_TYPES:
            raise Unsupported(
                f"{node.origin}: a GEMM of {ab} and {stored_dtype(self.graph, b.vid)}"
            )
        c_dtype = node.dtype if node.dtype in BLAS_TYPES else "float32"
        in_t, c_t = storage_ctype(ab), storage_ctype(c_dtype)
        args = [Arg("a", a.vid, f"const {in_t}*", "in"), Arg("b", b.vid, f"const {in_t}*", "in")]
        if bias is not None:
            bias_t = storage_ctype(stored_dtype(self.graph, bias.vid))
            args.append(Arg("bias", bias.vid, f"const {bias_t}*", "in"))
        args.append(Arg("c", node.vid, f"{c_t}*", "out"))
        ldc = padded_ldc(ab, c_dtype, batch * m, n)
        c_es = 4 if c_dtype == "float32" else 2
        c_bytes = -(-batch * m * ldc * c_es // 256) * 256
        pc = f"({c_t}*)ws" if ldc != n else "c"
        pack = (
            [
                f"  // C's rows of {n} elements are not 16-byte aligned: cuBLAS would fall back to",
                f"  // an align-1 kernel. Computed with rows of {ldc}, packed by one 2-D copy.",
                f"  const cudaError_t packed = cudaMemcpy2DAsync(c, {n * c_es}, ws, {ldc * c_es}, "
                f"{n * c_es}, {batch * m}, cudaMemcpyDeviceToDevice, stream);",
                "  if (packed != cudaSuccess) return (int)packed;",
            ]
            if ldc != n
            else []
        )
        # Aligned rows of C are not enough: cuBLAS picks the align-1 kernel from n itself (GPT-2's
        # head, H200 2026-12-07: 1.663 ms with C's rows padded). So B gets n rounded up too: a
        # copy of B in the workspace with ldc - n more rows (or columns) that are never cleared,
        # since they only feed C's columns past n, which the pack leaves out.
        pad_b = ldc != n and batch == 1
        n_blas, pad_copy, b_bytes = n, [], 0
        bias_ptr = "bias"
        if pad_b:
            b_es = 4 if ab == "float32" else 2
            if tb:  # B^T stored: n rows of k, `ldb` apart
                b_bytes = ldc * ldb * b_es
                copy = f"{ldb * b_es}, {pb}, {ldb * b_es}, {k * b_es}, {n}"
            else:  # B stored: k rows of n, `ldb` apart, rewritten `ldc` apart
                b_bytes = k * ldc * b_es
                copy = f"{ldc * b_es}, {pb}, {ldb * b_es}, {n * b_es}, {k}"
                ldb = ldc
            pad_copy = [
                f"  // B padded to {ldc} columns of C (the extra ones are never read back).",
                f"  {in_t}* bp = reinterpret_cast<{in_t}*>(ws + {c_bytes});",
                f"  const cudaError_t padded = cudaMemcpy2DAsync(bp, {copy}, "
                "cudaMemcpyDeviceToDevice, stream);",
                "  if (padded != cudaSuccess) return (int)padded;",
            ]
            pb, n_blas = "bp", ldc
            if bias is not None:  # the epilogue reads a bias element per column of C
                bias_t = storage_ctype(stored_dtype(self.graph, bias.vid))
                bias_es = 4 if bias_t == "float" else 2
                at = c_bytes + -(-b_bytes // 256) * 256
                pad_copy += [
                    f"  {bias_t}* biasp = reinterpret_cast<{bias_t}*>(ws + {at});",
                    "  const cudaError_t bias_padded = cudaMemcpyAsync(biasp, bias, "
                    f"{n * bias_es}, cudaMemcpyDeviceToDevice, stream);",
                    "  if (bias_padded != cudaSuccess) return (int)bias_padded;",
                ]
                b_bytes = -(-b_bytes // 256) * 256 + ldc * bias_es
                bias_ptr = "biasp"
        if ldc != n:  # C is computed with aligned rows in a workspace, then packed into c
            args.append(Arg("ws", -1, "unsigned char*", "ws", c_bytes + b_bytes))
        ta_ab, ta_c = BLAS_TYPES[ab], BLAS_TYPES[c_dtype]
        precision = "FP32 compute" if ab == "float32" else f"{ab} tensor cores, FP32 accumulate"
        params = ", ".join(f"{x.ctype} {x.name}" for x in args)
        what = (
            f"// {node.origin}: C[{batch}x{m}x{n}] = A[{m}x{k}]{'^T' if a.trans else ''} "
            f"* B[{k}x{n}]{'^T' if b.trans else ''}{what_views}"
        )
        if bias is not None:
            act = {"relu_bias": 1, "gelu_bias": 2}.get(epilogue, 0)  # stitch_lt_plan's `act`
            fused = {1: " + bias, ReLU", 2: " + bias, GELU (tanh)"}.get(act, " + bias")
            src = "\n".join(
                [
                    f"{what}{fused} on cuBLASLt (epilogue fused), {precision}",
                    f'extern "C" int {g.name}({params}, cudaStream_t stream) {{',
                    "  static StitchLtPlan plans[64];",
                    "  int dev = 0;",
                    "  cudaGetDevice(&dev);",
                    "  void* lt_ws = stitch_lt_workspace();",
                    "  if (lt_ws == nullptr) return (int)cudaErrorMemoryAllocation;",
                    *pad_copy,
                    f"  int rc = stitch_lt_plan(plans[dev], {op_b}, {op_a}, {n_blas}, {m}, {k}, "
                    f"{ldb}, {lda}, {ldc}, {act}, {pb}, {pa}, {pc}, {bias_ptr}, lt_ws, stream, "
                    f"{ta_ab});",
                    "  if (rc != 0) return rc;",
                    "  cublasLtMatmulDescSetAttribute(plans[dev].op, "
                    f"CUBLASLT_MATMUL_DESC_BIAS_POINTER, &{bias_ptr}, sizeof({bias_ptr}));",
                    "  const float alpha = 1.f, beta = 0.f;",
                    "  const cublasStatus_t st = cublasLtMatmul(stitch_cublaslt(), plans[dev].op, "
                    f"&alpha, {pb}, plans[dev].a, {pa}, plans[dev].b, &beta, {pc}, plans[dev].c, "
                    f"{pc}, plans[dev].c, &plans[dev].algo, lt_ws, STITCH_LT_WORKSPACE, stream);",
                    "  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
                    *pack,
                    "  return (int)cudaGetLastError();",
                    "}",
                ]
            )
            return GroupKernel(g, g.name, args, src, f"{node.origin}{fused} (cuBLASLt epilogue)")
        call = (
            f"cublasGemmStridedBatchedEx(h, {op_b}, {op_a}, {n}, {m}, {k}, &alpha, "
            f"{pb}, {ta_ab}, {ldb}, {sb}LL, {pa}, {ta_ab}, {lda}, {sa}LL, &beta, "
            f"{pc}, {ta_c}, {ldc}, {m * ldc}LL, {batch}, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)"
            if batch > 1
            else f"cublasGemmEx(h, {op_b}, {op_a}, {n_blas}, {m}, {k}, &alpha, {pb}, {ta_ab}, "
            f"{ldb}, {pa}, {ta_ab}, {lda}, &beta, {pc}, {ta_c}, {ldc}, CUBLAS_COMPUTE_32F, "
            "CUBLAS_GEMM_DEFAULT)"
        )
        src = "\n".join(
            [
                f"{what} on cuBLAS, {precision}",
                f'extern "C" int {g.name}({params}, cudaStream_t stream) {{',
                "  cublasHandle_t h = stitch_cublas_on(stream);  // capture-safe: see the preamble",
                "  if (h == nullptr) return STITCH_CUBLAS_ERROR;",
                *pad_copy,
                "  const float alpha = 1.f, beta = 0.f;",
                f"  const cublasStatus_t st = {call};",
                "  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;",
                *pack,
                "  return (int)cudaGetLastError();",
                "}",
            ]
        )
        return GroupKernel(g, g.name, args, src, node.origin)

    # -- recurrent modules ---------------------------------------------------------------------
    def rnn(self, g: Group) -> GroupKernel:
        """One launcher for a whole nn.RNN/LSTM/GRU call (see recurrent.py)."""
        rnn = g.nodes[0]
        outs = outputs_needed(self.graph, rnn, set(g.outputs))
        launch = rnn_launcher(rnn, outs, g.name)
        args = [Arg(f"in{k}", vid, "const float*", "in") for k, vid in enumerate(launch.inputs)]
        args += [Arg(f"out{k}", vid, "float*", "out") for k, vid in enumerate(launch.outputs)]
        args.append(Arg("ws", -1, "unsigned char*", "ws", launch.ws_bytes))
        return GroupKernel(g, g.name, args, launch.source, launch.comment)

    # -- scan ----------------------------------------------------------------------------------
    def scan(self, g: Group) -> GroupKernel:
        """A prefix sum along one dim. Along the contiguous last dim: one warp per row, 32
        elements per step (shuffle scan plus a carry); along another dim: one thread per
        column, sequential down the column (neighbouring threads read neighbouring columns)."""
        node = g.nodes[0]
        (x,) = node.uses
        axis = int(node.params["axis"])  # type: ignore[arg-type]
        shape = node.shape
        k1, r, k2 = numel(shape[:axis]), shape[axis], numel(shape[axis + 1 :])
        args = self._args(g)
        gen = _GroupGen(self.graph, g, {a.vid: a for a in args})
        load: list[str] = []
        v = gen.read_at(x, x.shape, "f", load)
        sig = self._signature(g.name, args)
        names = ", ".join(a.name for a in args)
        head = [
            f"__global__ void __launch_bounds__(256) {g.name}_kernel({sig}) {{",
            f"  typedef {gen.idx_t} idx_t;",
            f"  constexpr idx_t K1 = {k1}, R = {r}, K2 = {k2};",
        ]
        if k2 == 1:
            body = [
                "  const int lane = threadIdx.x & 31;",
                "  const idx_t warp = ((idx_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;",
                "  const idx_t warps = ((idx_t)gridDim.x * blockDim.x) >> 5;",
                "  for (idx_t row = warp; row < K1; row += warps) {",
                "    float carry = 0.f;",
                "    for (idx_t j0 = 0; j0 < R; j0 += 32) {",
                "      const idx_t j = j0 + lane;",
                "      float v = 0.f;",
                "      if (j < R) {",
                "        const idx_t f = row * R + j;",
                *_indent(load, 8),
                f"        v = {v};",
                "      }",
                "      #pragma unroll",
                "      for (int o = 1; o < 32; o <<= 1) {",
                "        const float t = __shfl_up_sync(0xffffffffu, v, o);",
                "        if (lane >= o) v += t;",
                "      }",
                "      v += carry;",
                f"      if (j < R) {args[-1].store('row * R + j', 'v')}",
                "      carry = __shfl_sync(0xffffffffu, v, 31);",
                "    }",
                "  }",
                "}",
            ]
            grid = f"stitch_grid({k1} * 32LL, 256, 8)"
        else:
            body = [
                "  const idx_t stride = (idx_t)gridDim.x * blockDim.x;",
                "  for (idx_t c = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; c < K1 * K2; "
                "c += stride) {",
                "    const idx_t k1 = c / K2, k2 = c % K2;",
                "    float acc = 0.f;",
                "    for (idx_t r = 0; r < R; ++r) {",
                "      const idx_t f = (k1 * R + r) * K2 + k2;",
                *_indent(load, 6),
                f"      acc += {v};",
                f"      {args[-1].store('f', 'acc')}",
                "    }",
                "  }",
                "}",
            ]
            grid = f"stitch_grid({k1 * k2}LL, 256, 8)"
        launch = [f"{g.name}_kernel<<<{grid}, 256, 0, stream>>>({names});"]
        src = "\n".join(head + body) + "\n\n" + self._launcher(g, args, launch)
        return GroupKernel(g, g.name, args, src, node.origin or "cumsum")

    # -- attention -----------------------------------------------------------------------------
    def attention(self, g: Group) -> GroupKernel:
        """One scaled_dot_product_attention as the flash kernel (see attention.py)."""
        node = g.nodes[0]
        args = self._args(g)
        ins = [(a.ctype, a.name, a.vid) for a in args if a.role == "in"]
        out = next(a for a in args if a.role == "out")
        ctype = out.ctype.replace(" __restrict__", "").rstrip("*").strip()
        launch = attention_launcher(node, g.name, ins, out.name, ctype)
        if launch.ws_bytes:
            args = [*args, Arg("ws", -1, "unsigned char*", "ws", launch.ws_bytes)]
        return GroupKernel(g, g.name, args, launch.source, launch.comment)

    def cuda_source(self, with_gemm: bool = True) -> str:
        """The whole CUDA file. `with_gemm=False` leaves out the cuBLAS launchers, for compile
        checks on machines whose toolkit has no cuBLAS headers."""
        parts = [
            "// Generated by the stitch-lsp builtin coder. Shapes are fixed at generation time."
        ]
        parts.append(PREAMBLE)
        if self.uses_cublas and with_gemm:
            parts.append(CUBLAS_PREAMBLE)
            if any(len(g.nodes[0].uses) > 2 for g in self.groups if g.kind == "gemm"):
                parts.append(CUBLASLT_PREAMBLE)
        if any(s.params.get("momentum", 0) is None for g in self.groups for s in g.sinks):
            parts.append(
                "// num_batches_tracked += 1 after a cumulative-average batch norm read the count\n"
                "__global__ void stitch_count_batch(long long* n) { n[0] += 1; }"
            )
        specs = [g.nodes[0].params["spec"] for g in self.groups if g.kind == "rnn"]
        if specs and with_gemm:
            parts.append(rnn_preamble(specs))  # type: ignore[arg-type]
        if any(g.kind == "attention" for g in self.groups):
            parts.append(ATTENTION_PREAMBLE)
        attention_at = len(parts)  # where the split merge goes, if a launch splits
        reduced_at = len(parts)
        for g in self.groups:
            if g.kind in ("pointwise", "reduction"):
                k = self.kernel(g)
            elif g.kind == "scan":
                k = self.scan(g)
            elif g.kind == "attention":
                k = self.attention(g)
            elif g.kind == "gemm" and with_gemm:
                k = self.gemm(g)
            elif g.kind == "rnn" and with_gemm:
                k = self.rnn(g)
            else:
                continue
            self.kernels.append(k)
            what = "reduction " + g.layout.describe() if g.layout else g.kind
            parts.append(f"// ---- {k.name} ({what}) fuses: {k.comment}\n{k.source}")
        if any(k.group.kind == "attention" and k.args[-1].role == "ws" for k in self.kernels):
            parts.insert(attention_at, COMBINE_KERNEL)
        reduced = any(n.dtype in REDUCED_CTYPES for n in self.graph.nodes)
        if reduced or any(a.reduced for k in self.kernels for a in k.args):
            parts.insert(reduced_at, REDUCED_PREAMBLE)
        return "\n\n".join(parts) + "\n"


def stored_dtype(graph: Graph, vid: int) -> str:
    """The dtype a value has in memory: a leaf's or a PyTorch fallback's own; what our kernels
    store is the node's dtype, except predicates (bool), which they store as 1.f / 0.f."""
    leaf = graph.leaves.get(vid)
    if leaf is not None:
        return leaf.dtype
    node = graph.node(vid)
    if node is None:
        return "float32"
    if node.kind != "aten" and node.dtype == "bool":
        return "float32"
    return node.dtype


def _in_ctype(graph: Graph, vid: int) -> str:
    return f"const {storage_ctype(stored_dtype(graph, vid))}* __restrict__"


def leaf_expr(leaf: Leaf) -> str:
    return leaf.expr
