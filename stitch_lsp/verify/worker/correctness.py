"""Output comparison and memory poisoning (runs in the worker; imports torch)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from stitch_lsp.models.verify import TrialResult

TOLERANCES: dict[torch.dtype, float] = {
    torch.float32: 1e-4,
    torch.float64: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}
POISON_BYTE = 0xFF  # all-ones bytes: NaN in fp32/fp16/bf16/fp64, -1 in integers
BIG_POISON_BYTES = 512 * 1024 * 1024
COMPARE_SLICE = 1 << 26  # elements per slice of a comparison: 512 MiB in float64


def tolerance(dtype: torch.dtype) -> float:
    return TOLERANCES.get(dtype, 0.0)


def flatten(out: Any) -> list[Any]:
    """A module's outputs as a flat list (a tensor, or tuples/lists of them)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, tuple | list):
        flat: list[Any] = []
        for item in out:
            flat.extend(flatten(item))
        return flat
    return [out]


def to_device(values: Sequence[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def clone_all(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def poison_allocator(device: torch.device, sizes: Sequence[int]) -> None:
    """Leave the caching allocator's free blocks full of NaN bytes.

    We allocate blocks the size of each expected output (a few of each, since an output can land
    in any of them), plus one large block, fill them with 0xFF and free them. An output element
    the candidate never writes then reads back as NaN and is counted as unwritten, and memory
    that held the reference's results can no longer pass for the candidate's.
    """
    keep: list[torch.Tensor] = []
    for nbytes in sizes:
        for _ in range(3):
            keep.append(torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device))
    try:
        free, _total = torch.cuda.mem_get_info(device)
        big = min(BIG_POISON_BYTES, max(0, free // 4))
        if big:
            keep.append(torch.empty(big, dtype=torch.uint8, device=device))
    except RuntimeError:
        pass
    for t in keep:
        t.fill_(POISON_BYTE)
    torch.cuda.synchronize(device)
    del keep


def compare(
    index: int, which: int, expected: Any, actual: Any, atol: float, rtol: float
) -> TrialResult:
    """One output of one trial: shape, dtype class, tolerance, unwritten elements."""
    if not isinstance(expected, torch.Tensor):
        ok = type(actual) is type(expected) and actual == expected
        return TrialResult(
            index=index,
            output=which,
            passed=bool(ok),
            message="" if ok else f"expected {expected!r}, got {actual!r}",
        )
    if not isinstance(actual, torch.Tensor):
        return TrialResult(
            index=index,
            output=which,
            passed=False,
            message=f"expected a tensor, got {type(actual).__name__}",
        )
    if actual.shape != expected.shape:
        return TrialResult(
            index=index,
            output=which,
            passed=False,
            numel=expected.numel(),
            message=f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}",
        )
    if actual.device != expected.device:
        return TrialResult(
            index=index,
            output=which,
            passed=False,
            numel=expected.numel(),
            message=f"output on {actual.device}, expected {expected.device}",
        )
    exp = expected.detach()
    act = actual.detach()
    if exp.numel() == 0:
        return TrialResult(index=index, output=which, passed=True, numel=0)
    tally = _Tally(exp.shape)
    # In slices: whole-tensor temporaries (the difference, isclose's, the relative error) cost
    # several times the output, and KernelBench's largest level-1 outputs are 6 GiB.
    e_flat, a_flat = exp.reshape(-1), act.reshape(-1)
    for lo in range(0, e_flat.numel(), COMPARE_SLICE):
        tally.add(lo, e_flat[lo : lo + COMPARE_SLICE], a_flat[lo : lo + COMPARE_SLICE], atol, rtol)
    message = ""
    if tally.mismatches:
        message = (
            f"{tally.mismatches} of {exp.numel()} elements differ beyond atol=rtol={atol:g}; "
            f"first at {tuple(tally.first or ())}: expected {tally.exp_v:.6g}, "
            f"got {tally.act_v:.6g}"
        )
        if tally.unwritten:
            message += f"; {tally.unwritten} elements were never written (still NaN poison)"
    return TrialResult(
        index=index,
        output=which,
        passed=tally.mismatches == 0,
        max_abs_error=tally.max_abs,
        max_rel_error=tally.max_rel,
        mismatches=tally.mismatches,
        numel=exp.numel(),
        first_mismatch=tally.first,
        expected=tally.exp_v,
        actual=tally.act_v,
        unwritten=tally.unwritten,
        message=message,
    )


class _Tally:
    """Running totals of one output's comparison, fed slice by slice of the flattened tensors."""

    def __init__(self, shape: tuple[int, ...] | torch.Size) -> None:
        self.shape = tuple(shape)
        self.mismatches = 0
        self.unwritten = 0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.finite = True
        self.first: list[int] | None = None
        self.exp_v: float | None = None
        self.act_v: float | None = None

    def add(self, lo: int, exp: torch.Tensor, act: torch.Tensor, atol: float, rtol: float) -> None:
        if exp.is_floating_point() or act.is_floating_point():
            # fp32 math is enough for fp32/fp16/bf16 outputs and halves the memory of fp64.
            wide = torch.float64 if torch.float64 in (exp.dtype, act.dtype) else torch.float32
            e, a = exp.to(wide), act.to(wide)
        else:
            e, a = exp.to(torch.int64), act.to(torch.int64)
        bad = ~torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        n_bad = int(bad.sum().item())
        if n_bad and self.first is None:
            at = int(torch.argmax(bad.to(torch.uint8)).item())  # the first one in this slice
            self.first = _unravel(lo + at, self.shape)
            self.exp_v, self.act_v = float(e[at].item()), float(a[at].item())
        self.mismatches += n_bad
        del bad
        diff = (a - e).abs()
        if self.finite and not bool(torch.isfinite(diff).all()):
            self.finite = False
            self.max_abs = self.max_rel = float("inf")
        if self.finite:
            self.max_abs = max(self.max_abs, float(diff.max().item()))
            eps = max(atol, 1e-12)
            if diff.is_floating_point():
                rel = diff.div_(e.abs().add_(eps))  # in place: diff is not needed after
            else:
                rel = diff / (e.abs() + eps)
            self.max_rel = max(self.max_rel, float(rel.max().item()))
        del diff
        if act.is_floating_point():
            self.unwritten += int((torch.isnan(a) & ~torch.isnan(e)).sum().item())


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return list(reversed(out))


def same_values(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Bitwise equality of two input lists (NaN equals NaN)."""
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not x.is_floating_point():
                if not torch.equal(x, y):
                    return False
                continue
            xf, yf = x.reshape(-1), y.reshape(-1)
            for lo in range(0, xf.numel(), COMPARE_SLICE):  # sliced as in compare()
                xs, ys = xf[lo : lo + COMPARE_SLICE], yf[lo : lo + COMPARE_SLICE]
                xs, ys = torch.nan_to_num(xs, nan=0.125), torch.nan_to_num(ys, nan=0.125)
                if not torch.equal(xs, ys):
                    return False
        elif x != y:
            return False
    return True


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a0, a1 = storage_span(a)
    b0, b1 = storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0
