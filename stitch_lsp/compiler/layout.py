"""Views as strides: permute, transpose, slices, expand, unfold and reshape on IR uses.

Every IR value is stored contiguously; a view is a `Use` with element strides and an offset
into that storage, as PyTorch's own views are. A view that strides cannot express (a reshape of
a permuted tensor) returns None, and capture materialises a contiguous copy first, as
`torch.reshape` does. Torch-free.
"""

from __future__ import annotations

import math

from stitch_lsp.compiler.ir import Shape, Unsupported, Use


def contiguous_strides(shape: Shape) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def strides_of(u: Use) -> tuple[int, ...]:
    """The element strides a use reads with (the `trans` flag spelled out)."""
    if u.strides is not None:
        return u.strides
    if u.trans:
        s = u.shape
        base = contiguous_strides((*s[:-2], s[-1], s[-2]))
        return (*base[:-2], base[-1], base[-2])
    return contiguous_strides(u.shape)


def _same_layout(shape: Shape, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(d == 1 or x == y for d, x, y in zip(shape, a, b, strict=True))


def make(src: Use, shape: Shape, strides: tuple[int, ...], offset: int) -> Use:
    """A view of `src`'s storage. Plain (no strides) only where that is certain from `src`
    alone: src reads its whole storage and the view has the natural layout of all of it."""
    shape = tuple(int(d) for d in shape)
    whole = not src.strided and math.prod(shape) == math.prod(src.shape)
    if whole and offset == 0 and _same_layout(shape, strides, contiguous_strides(shape)):
        return Use(src.vid, shape)
    return Use(src.vid, shape, strides=tuple(int(s) for s in strides), offset=int(offset))


def canonical(u: Use, storage: int) -> Use:
    """A strided use that reads all `storage` elements in their natural order becomes plain."""
    if not u.strided or u.offset != 0 or math.prod(u.shape) != storage:
        return u
    if _same_layout(u.shape, strides_of(u), contiguous_strides(u.shape)):
        return Use(u.vid, u.shape)
    return u


def is_contiguous(u: Use) -> bool:
    return not u.trans and not u.strided


def view(u: Use, shape: Shape) -> Use | None:
    """`u.view(shape)`, or None where no strides express it (ATen's computeStride)."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != math.prod(u.shape):
        raise Unsupported(f"cannot view {u.shape} as {shape}")
    if is_contiguous(u):
        return Use(u.vid, shape)
    old, old_st = u.shape, strides_of(u)
    if math.prod(shape) == 0:
        return None
    if not old:
        return make(u, shape, (1,) * len(shape), u.offset)
    new_st = [0] * len(shape)
    view_d = len(shape) - 1
    chunk = old_st[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and old_st[d - 1] != tensor_numel * chunk):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                new_st[view_d] = view_numel * chunk
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk = old_st[d - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return make(u, shape, tuple(new_st), u.offset)


def permute(u: Use, dims: tuple[int, ...]) -> Use:
    rank = len(u.shape)
    dims = tuple(d % rank for d in dims) if rank else ()
    if sorted(dims) != list(range(rank)):
        raise Unsupported(f"permute {dims} of a rank-{rank} tensor")
    st = strides_of(u)
    return make(u, tuple(u.shape[d] for d in dims), tuple(st[d] for d in dims), u.offset)


def transpose(u: Use, d0: int, d1: int) -> Use:
    rank = len(u.shape)
    if rank < 2:
        return u
    dims = list(range(rank))
    dims[d0 % rank], dims[d1 % rank] = dims[d1 % rank], dims[d0 % rank]
    return permute(u, tuple(dims))


def slice_(u: Use, dim: int, start: int | None, end: int | None, step: int = 1) -> Use:
    rank = len(u.shape)
    dim %= rank
    size = u.shape[dim]
    if step <= 0:
        raise Unsupported("slices with a step below 1 are not supported")
    lo, hi, _ = slice(start, end, step).indices(size)
    length = max(0, -(-(hi - lo) // step))
    st = strides_of(u)
    shape = (*u.shape[:dim], length, *u.shape[dim + 1 :])
    strides = (*st[:dim], st[dim] * step, *st[dim + 1 :])
    return make(u, shape, strides, u.offset + lo * st[dim])


def select(u: Use, dim: int, index: int) -> Use:
    rank = len(u.shape)
    dim %= rank
    size = u.shape[dim]
    if not -size <= index < size:
        raise Unsupported(f"index {index} is out of range for size {size}")
    index %= size
    st = strides_of(u)
    shape = u.shape[:dim] + u.shape[dim + 1 :]
    return make(u, shape, st[:dim] + st[dim + 1 :], u.offset + index * st[dim])


def unsqueeze(u: Use, dim: int) -> Use:
    rank = len(u.shape) + 1
    dim %= rank
    st = strides_of(u)
    inner = st[dim] * u.shape[dim] if dim < len(u.shape) else 1
    shape = (*u.shape[:dim], 1, *u.shape[dim:])
    return make(u, shape, (*st[:dim], inner, *st[dim:]), u.offset)


def squeeze(u: Use, dims: tuple[int, ...] | None = None) -> Use:
    rank = len(u.shape)
    drop = (
        {i for i, d in enumerate(u.shape) if d == 1}
        if dims is None
        else {d % rank for d in dims if u.shape[d % rank] == 1}
    )
    st = strides_of(u)
    keep = [i for i in range(rank) if i not in drop]
    return make(u, tuple(u.shape[i] for i in keep), tuple(st[i] for i in keep), u.offset)


def expand(u: Use, shape: Shape) -> Use:
    """Broadcast to `shape` (-1 keeps a dim); broadcast dims read with stride 0."""
    rank = len(shape)
    lead = rank - len(u.shape)
    if lead < 0:
        raise Unsupported(f"cannot expand {u.shape} to {shape}")
    st = strides_of(u)
    new_shape, new_st = [], []
    for i, d in enumerate(shape):
        if i < lead:
            new_shape.append(int(d))
            new_st.append(0)
            continue
        old = u.shape[i - lead]
        want = old if d == -1 else int(d)
        if old == want:
            new_shape.append(want)
            new_st.append(st[i - lead])
        elif old == 1:
            new_shape.append(want)
            new_st.append(0)
        else:
            raise Unsupported(f"cannot expand {u.shape} to {shape}")
    if tuple(new_shape) == tuple(u.shape):
        return u
    return Use(u.vid, tuple(new_shape), strides=tuple(new_st), offset=u.offset)


def unfold(u: Use, dim: int, size: int, step: int) -> Use:
    """`Tensor.unfold`: windows of `size` every `step` along `dim`, as a new last dim."""
    rank = len(u.shape)
    dim %= rank
    st = strides_of(u)
    count = (u.shape[dim] - size) // step + 1
    shape = (*u.shape[:dim], count, *u.shape[dim + 1 :], size)
    strides = (*st[:dim], st[dim] * step, *st[dim + 1 :], st[dim])
    return Use(u.vid, shape, strides=strides, offset=u.offset)


def broadcast_view(u: Use, storage: int) -> Use:
    """An expanded use of a whole `storage` (the other dims in natural order) becomes a plain
    use with size-1 dims: the older broadcast spelling, read without extra index math."""
    if not u.strided or u.trans:
        return u
    assert u.strides is not None
    shape = tuple(1 if s == 0 else d for d, s in zip(u.shape, u.strides, strict=True))
    if u.offset != 0 or math.prod(shape) != storage:
        return u
    if _same_layout(shape, u.strides, contiguous_strides(shape)):
        return Use(u.vid, shape)
    return u


def compose(u: Use, base: Use, storage: int) -> Use | None:
    """`u`, a read of a contiguous copy of `base` (a view of a value holding `storage`
    elements), as a read of base's own value: the copy is then not needed. A dim of `u` may
    step inside one of base's dims (a head split), or walk several of them as one (a reshape)
    where they are one run in base's value too. None where strides cannot say it."""
    old = tuple(base.shape)
    if math.prod(old) == 0:
        return None
    bst = strides_of(base)
    if not (u.strided or u.trans):
        v = base if tuple(u.shape) == old else view(base, u.shape)
        return None if v is None else canonical(v, storage)
    cs = contiguous_strides(old)
    real = [k for k, d in enumerate(old) if d != 1]
    rest, offset = u.offset, base.offset
    start: dict[int, int] = {}
    for k in real:
        start[k], rest = divmod(rest, cs[k])
        offset += start[k] * bst[k]
    if rest:
        return None
    walk = dict.fromkeys(real, 0)
    strides: list[int] = []
    for extent, s in zip(u.shape, strides_of(u), strict=True):
        if extent == 1 or s == 0:
            strides.append(0)
            continue
        at = next((i for i, k in enumerate(real) if cs[k] <= s < cs[k] * old[k]), None)
        if at is None or s % cs[real[at]]:
            return None
        dim = real[at]
        step = s // cs[dim]
        if step == 1 and start[dim] + extent > old[dim]:
            # A run: the dims outward of `dim` must follow on in base's value as they do here.
            reach, first = start[dim] + extent - 1, at
            span = old[dim]
            while span <= reach and first > 0:
                outer, prev = real[first - 1], real[first]
                if bst[outer] != bst[prev] * old[prev]:
                    return None
                span *= old[outer]
                first -= 1
            inner = 1
            pos = 0
            for k in reversed(real[first : at + 1]):
                pos += start[k] * inner
                inner *= old[k]
            if pos + extent > span or any(walk[k] for k in real[first : at + 1]):
                return None
            for k in real[first : at + 1]:
                walk[k] = old[k] - 1 - start[k]  # spent: no other dim may step here
        else:
            walk[dim] += step * (extent - 1)
        strides.append(step * bst[dim])
    if any(start[k] + walk[k] >= old[k] for k in real):
        return None
    return canonical(Use(base.vid, tuple(u.shape), strides=tuple(strides), offset=offset), storage)


def gemm_operand(u: Use, storage: int) -> Use | None:
    """A plain or `trans` use for a GEMM operand where strides allow (else None)."""
    u = canonical(u, storage)
    if not u.strided:
        return u
    if u.trans or len(u.shape) < 2 or u.offset != 0 or math.prod(u.shape) != storage:
        return None
    s = u.shape
    flipped = (*s[:-2], s[-1], s[-2])
    st = strides_of(u)
    if _same_layout(flipped, (*st[:-2], st[-1], st[-2]), contiguous_strides(flipped)):
        return Use(u.vid, s, trans=True)
    return None


def index_expr(index: str, consumer: Shape, u: Use) -> tuple[str, bool]:
    """C expression for the storage offset a strided use reads at the consumer's flat index.

    Returns (expr, identity). The use broadcasts to the consumer (missing or size-1 dims read
    with stride 0); runs of dims that stay contiguous are merged, so each costs one div/mod.
    """
    shape, st = tuple(u.shape), strides_of(u)
    while len(shape) > len(consumer) and shape[0] == 1:
        shape, st = shape[1:], st[1:]
    if len(shape) > len(consumer):
        raise Unsupported(f"operand shape {u.shape} does not broadcast to {consumer}")
    lead = len(consumer) - len(shape)
    dims: list[tuple[int, int]] = []  # (consumer size, operand stride), size-1 dims dropped
    for i, c in enumerate(consumer):
        if c == 1:
            continue
        if i < lead:
            dims.append((c, 0))
            continue
        o = shape[i - lead]
        if o == c:
            dims.append((c, st[i - lead]))
        elif o == 1:
            dims.append((c, 0))
        else:
            raise Unsupported(f"operand shape {u.shape} does not broadcast to {consumer}")
    runs: list[list[int]] = []  # [size, stride of the run's innermost dim]
    for c, s in dims:
        if runs and runs[-1][1] == s * c:
            runs[-1][0] *= c
            runs[-1][1] = s
        elif runs and runs[-1][1] == 0 and s == 0:
            runs[-1][0] *= c
        else:
            runs.append([c, s])
    if len(runs) == 1 and runs[0][1] == 1 and u.offset == 0:
        return index, True
    terms = [str(u.offset)] if u.offset else []
    inner = 1
    parts = []
    for i in range(len(runs) - 1, -1, -1):
        size, stride = runs[i]
        if stride != 0:
            t = index if inner == 1 else f"({index} / {inner})"
            if i != 0:
                t = f"({t} % {size})"
            if stride != 1:
                t = f"{t} * {stride}"
            parts.append(t)
        inner *= size
    terms += reversed(parts)
    return (" + ".join(terms) if terms else "0"), False


def spatial_coords(index: str, shape: Shape) -> tuple[list[str], int]:
    """C lines naming `o2`, `o3`, ... the spatial coordinates of flat index `index` in an
    (N, C, spatial...) contiguous `shape`, and the spatial size: `index` / it is n * C + c.
    For the windows that loop over them (pools, direct convolutions)."""
    lines, step = [], 1
    for d in range(len(shape) - 1, 1, -1):
        lines.append(f"  const idx_t o{d} = ({index} / {step}) % {shape[d]};")
        step *= shape[d]
    return lines[::-1], step


def blas_operand(u: Use) -> tuple[bool, int, int, int]:
    """(transposed, ld, batch stride, offset) of a row-major GEMM operand of shape
    (batch, r, c) or (r, c), for cuBLAS (which sees it column-major)."""
    r, c = u.shape[-2], u.shape[-1]
    if not u.strided:
        return u.trans, (r if u.trans else c), r * c, 0
    st = strides_of(u)
    batch = st[-3] if len(u.shape) == 3 else r * c
    if st[-1] == 1 or c == 1:
        return False, max(st[-2], c, 1) if r != 1 else max(c, 1), batch, u.offset
    if st[-2] == 1 or r == 1:
        return True, max(st[-1], r, 1) if c != 1 else max(r, 1), batch, u.offset
    raise Unsupported(f"a GEMM operand with strides {st} (no unit stride)")
