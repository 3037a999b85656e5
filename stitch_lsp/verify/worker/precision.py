"""The float64 oracle: how far candidate and fp32 reference each are from the exact answer.

The reference runs again in float64 (model and inputs upcast with `.double()`, same weights) on
the same inputs. An honest fp32 kernel that only sums in another order lands about as far from
that answer as the fp32 reference does. A kernel that computes in TF32, fp16 or bf16 lands
hundreds of times further (10 or 7 mantissa bits instead of 23). Inputs from `get_inputs()` can
hide that inside atol = rtol = 1e-4: all-positive values make a long sum's own rounding as large
as the lost input bits. So the oracle judges on transformed copies of them, where the products
cancel: random signs, random signs with a wide dynamic range, and random signs with mantissas
like 1 + 2^-12 that TF32 and fp16 cannot hold. A transform that makes the fp32 reference
non-finite (log, sqrt of negative values) is skipped and named.

Errors are measured in tolerance units, max |y - y64| / (atol + rtol * |y64|): the quantity the
pass rule bounds by 1, so an output near zero does not dominate and the numbers read the same
for every problem. Thresholds (ORACLE_FACTOR, ORACLE_FLOOR) are calibrated by
benchmarks/precision_calibration.py; see BENCHMARKS.md.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from stitch_lsp.models.verify import PrecisionReport, PrecisionTrial
from stitch_lsp.verify.worker.correctness import clone_all, flatten

ORACLE_FACTOR = 128.0
"""A candidate is a precision downgrade when its error from float64 is more than this many times
the fp32 reference's own on some input set. In the CPU calibration, honest fp32 reorderings
(sequential, reversed, 32 partial sums, 16 chunks, a sum per block then one add per block, a GEMM
with one FMA per step) reached at most 29x on the transformed inputs (254x on all-positive
get_inputs data, but inside the tolerance there: see ORACLE_FLOOR); TF32, fp16 and bf16 reached
at least 520x, outside the tolerance, on their most telling transform."""
ORACLE_FLOOR = 1.0
"""... and the candidate must be outside the tolerance itself (in tolerance units, against
float64) on that input set. Long sums of positive terms make any fp32 order drift from the
exact answer, and they make the reference's own error very small, so a ratio alone flags honest
code there; inside the tolerance such drift is what KernelBench's rule allows."""
TRANSFORMS = ("signs", "range", "mantissa")


@dataclass(frozen=True)
class OutputError:
    """One output's distance from the float64 answer."""

    max_abs: float
    tol_units: float
    mean_abs: float = math.nan  # not measured where NaN


def error_from(
    expected64: torch.Tensor, actual: torch.Tensor, atol: float, rtol: float
) -> OutputError:
    """Max abs error and max error in tolerance units of `actual` against float64 `expected64`."""
    e = expected64.detach().to(torch.float64)
    a = actual.detach().to(torch.float64)
    if e.numel() == 0:
        return OutputError(0.0, 0.0, 0.0)
    diff = (a - e).abs()
    if not bool(torch.isfinite(diff).all()):
        return OutputError(math.inf, math.inf, math.inf)
    max_abs = float(diff.max().item())
    mean_abs = float(diff.mean().item())
    units = float(diff.div_(e.abs().mul_(rtol).add_(max(atol, 1e-30))).max().item())
    return OutputError(max_abs, units, mean_abs)


REDUCED_FACTOR = 1.1
"""In bf16/fp16 a deep network's eager output is itself far from the exact answer (a language
model's last layer 0.04 to 0.25 off at scale 3 to 7, H100 2026-12-06), and a fused program that
rounds where eager rounds but keeps more in float registers differs from eager by as much. A
candidate that misses eager's tolerance passes when it is no further than this from the float64
answer than eager is, in tolerance units (the rule the CPU capture tests apply too)."""
REDUCED_DTYPES = (torch.bfloat16, torch.float16)
REDUCED_MEAN_FACTOR = 1.05
REDUCED_MAX_FACTOR = 1.25
REDUCED_UNITS_CAP = 1.5
"""The worst element in tolerance units is one element: in a deep bf16 network it sits where
|y64| is near zero, and which element that is depends on the order a row reduction sums in; the
largest absolute error is one element too. Honest fused programs on a GPU (H200, 2026-12-07)
were up to 1.18x eager's worst in tolerance units (BERT, ViT-S at full size; T5 at the small
size) and up to 1.21x in largest absolute error (T5 small), but 0.998-1.023x in mean absolute
error. A program that sums a GEMM's K terms in bf16 was 1.29-1.98x eager in largest and
1.14-1.97x in mean absolute error on every model probed (benchmarks/bf16_rule_probe.py). So a
miss over REDUCED_FACTOR in tolerance units still passes when the mean absolute error is at
eager's level (REDUCED_MEAN_FACTOR), the largest absolute error within REDUCED_MAX_FACTOR and
the worst element within REDUCED_UNITS_CAP of eager's."""


def within_reference_error(candidate: OutputError, reference: OutputError) -> bool:
    """A reduced-precision miss that the float64 oracle clears: finite, and no further from the
    exact answer than the reduced-precision reference itself: in tolerance units, or, where
    only the worst element is further, in largest and in mean absolute error."""
    cand, ref = candidate, reference
    if not (math.isfinite(cand.tol_units) and math.isfinite(cand.max_abs)):
        return False
    if cand.tol_units <= REDUCED_FACTOR * ref.tol_units:
        return True
    if math.isnan(cand.mean_abs) or math.isnan(ref.mean_abs):
        return False
    return (
        cand.tol_units <= REDUCED_UNITS_CAP * ref.tol_units
        and cand.max_abs <= REDUCED_MAX_FACTOR * ref.max_abs
        and cand.mean_abs <= REDUCED_MEAN_FACTOR * ref.mean_abs
    )


def is_downgrade(candidate_units: float, reference_units: float) -> bool:
    """The oracle's rule: far from float64, and far further than the fp32 reference is."""
    return candidate_units > ORACLE_FLOOR and candidate_units > ORACLE_FACTOR * reference_units


def ratio(candidate_units: float, reference_units: float) -> float | None:
    if reference_units > 0:
        return candidate_units / reference_units
    return None if candidate_units == 0 else math.inf


# --------------------------------------------------------------------------- transformed inputs


def transform(name: str, values: Sequence[Any], seed: int) -> list[Any]:
    """Copies of `values` with every floating tensor transformed; other values unchanged.

    - signs: each element's sign flipped at random (products cancel, as in real data);
    - range: signs flipped and each element scaled by 2^k, k uniform in [-6, 6];
    - mantissa: signs flipped; each element keeps its binade, its mantissa becomes 1 + 2^-12 u
      (u uniform in [0, 1)): exact in fp32, rounded away entirely by TF32 and fp16.
    """
    if name not in TRANSFORMS:
        raise ValueError(f"unknown transform {name!r}")
    out: list[Any] = []
    for i, v in enumerate(values):
        if not (isinstance(v, torch.Tensor) and v.is_floating_point()) or v.numel() == 0:
            out.append(v.clone() if isinstance(v, torch.Tensor) else v)
            continue
        gen = torch.Generator(device=v.device)
        gen.manual_seed(seed * 1009 + i)
        x = v.detach().to(torch.float32)
        flip = torch.randint(0, 2, x.shape, generator=gen, device=x.device)
        x = torch.where(flip.bool(), -x, x)
        if name == "range":
            k = torch.randint(-6, 7, x.shape, generator=gen, device=x.device).to(torch.float32)
            x = x * torch.exp2(k)
        elif name == "mantissa":
            mag = x.abs()
            binade = torch.exp2(torch.floor(torch.log2(torch.where(mag > 0, mag, 1.0))))
            u = torch.rand(x.shape, generator=gen, device=x.device)
            x = torch.where(mag > 0, torch.sign(x) * binade * (1.0 + u * 2.0**-12), x)
        out.append(x.to(v.dtype).contiguous())
    return out


def upcast(values: Sequence[Any], dtype: torch.dtype = torch.float64) -> list[Any]:
    return [
        v.detach().to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for v in values
    ]


ORACLE_DTYPES = (torch.float64, torch.float32)
"""The precisions the reference runs in to judge a miss, tried in order. float32 only stands in
for a bf16/fp16 reference that cannot run in float64 (transformers' mixture-of-experts layers
call torch._grouped_mm, which has no float64 kernel): its steps are 2^16 times finer than
bf16's, so it still measures how far the reduced-precision reference is from the exact answer."""


def oracle_dtypes(expected: torch.dtype) -> tuple[torch.dtype, ...]:
    """The oracle precisions for a miss on an output of dtype `expected`, in order."""
    return ORACLE_DTYPES if expected in REDUCED_DTYPES else ORACLE_DTYPES[:1]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def oracle_model(ref_model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of the reference in `dtype` (same weights, buffers and mode)."""
    return copy.deepcopy(ref_model).to(dtype)


def float64_model(ref_model: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of the reference (same weights, buffers and mode)."""
    return oracle_model(ref_model, torch.float64)


def run_in(model: Callable[..., Any], values: Sequence[Any], dtype: torch.dtype) -> list[Any]:
    """The outputs of `model` (a copy in `dtype`) on `values` with floating tensors cast."""
    with torch.no_grad():
        return flatten(model(*upcast(clone_all(values), dtype)))


def run64(model64: Callable[..., Any], values: Sequence[Any]) -> list[Any]:
    return run_in(model64, values, torch.float64)


# --------------------------------------------------------------------------- the oracle


def compare_outputs(
    label: str,
    cand_outs: Sequence[Any],
    ref_outs: Sequence[Any],
    outs64: Sequence[Any],
) -> list[PrecisionTrial]:
    """One PrecisionTrial per floating output (tolerance from the reference output's dtype)."""
    from stitch_lsp.verify.worker.correctness import tolerance

    trials = []
    for k, (c, r, e) in enumerate(zip(cand_outs, ref_outs, outs64, strict=False)):
        if not all(isinstance(t, torch.Tensor) for t in (c, r, e)) or not r.is_floating_point():
            continue
        if c.shape != r.shape or e.shape != r.shape:
            continue
        tol = tolerance(r.dtype) or 1e-4
        ec = error_from(e, c, tol, tol)
        er = error_from(e, r, tol, tol)
        trials.append(
            PrecisionTrial(
                inputs=label,
                output=k,
                candidate_error=ec.max_abs,
                reference_error=er.max_abs,
                candidate_tol_units=ec.tol_units,
                reference_tol_units=er.tol_units,
                ratio=ratio(ec.tol_units, er.tol_units),
                downgrade=is_downgrade(ec.tol_units, er.tol_units),
            )
        )
    return trials


def all_finite(values: Sequence[Any]) -> bool:
    return all(
        bool(torch.isfinite(v).all())
        for v in values
        if isinstance(v, torch.Tensor) and v.is_floating_point()
    )


def oracle(
    ref_model: Callable[..., Any],
    cand_model: Callable[..., Any],
    model64: Callable[..., Any],
    first: tuple[Sequence[Any], Sequence[Any], Sequence[Any]] | None,
    inputs: Sequence[Any],
    *,
    seed: int,
    transforms: Sequence[str] = TRANSFORMS,
    sync: Callable[[], None] = lambda: None,
) -> PrecisionReport:
    """Run the oracle on `first` (inputs, reference outputs, candidate outputs of a correctness
    trial, already computed) and on each transform of `inputs`."""
    report = PrecisionReport(factor=ORACLE_FACTOR, floor=ORACLE_FLOOR)
    if first is not None:
        values, ref_outs, cand_outs = first
        report.trials += compare_outputs("get_inputs", cand_outs, ref_outs, run64(model64, values))
    for name in transforms:
        values = transform(name, inputs, seed)
        with torch.no_grad():
            ref_outs = flatten(ref_model(*clone_all(values)))
        if not all_finite(ref_outs):
            report.skipped.append(
                f"{name}: the fp32 reference gives non-finite outputs on these inputs "
                "(outside its domain)"
            )
            continue
        outs64 = run64(model64, values)
        if not all_finite(outs64):
            report.skipped.append(f"{name}: the float64 reference gives non-finite outputs")
            continue
        with torch.no_grad():
            cand_outs = flatten(cand_model(*clone_all(values)))
        sync()
        report.trials += compare_outputs(name, cand_outs, ref_outs, outs64)
        del ref_outs, cand_outs, outs64
    return report


def worst(report: PrecisionReport) -> PrecisionTrial | None:
    """The trial that most clearly shows a downgrade (else the largest ratio)."""
    if not report.trials:
        return None

    def key(t: PrecisionTrial) -> tuple[bool, float]:
        return (t.downgrade, t.ratio if t.ratio is not None else 0.0)

    return max(report.trials, key=key)


def describe_cleared(
    cand: OutputError, ref: OutputError, dtype: str, oracle: str = "float64"
) -> str:
    """The note on a reduced-precision miss the oracle (the reference run in `oracle`) cleared."""
    text = (
        f"cleared by the {oracle} oracle: in {dtype} the reference itself is "
        f"{_sci(ref.tol_units)} tolerance units from {oracle} and the candidate "
        f"{_sci(cand.tol_units)}"
    )
    if cand.tol_units <= REDUCED_FACTOR * ref.tol_units:
        return text + f" (no more than {REDUCED_FACTOR}x the reference's own error)"
    return text + (
        f"; in absolute error the candidate is {_sci(cand.max_abs)} at most and "
        f"{_sci(cand.mean_abs)} on average, the reference {_sci(ref.max_abs)} and "
        f"{_sci(ref.mean_abs)} (no more than {REDUCED_MAX_FACTOR}x and {REDUCED_MEAN_FACTOR}x)"
    )


def describe_miss(
    candidate_error: float,
    cand64: float,
    ref64: float,
    oracle: str = "float64",
    reference: str = "fp32",
) -> str:
    """The sentence added to a tolerance miss: both errors, so a user can judge deep networks."""
    return (
        f"candidate max err {_sci(candidate_error)} vs the {reference} reference "
        f"({_sci(cand64)} from {oracle}); the {reference} reference itself is {_sci(ref64)} "
        f"from {oracle}"
    )


def _sci(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    mant, _, exp = f"{x:.1e}".partition("e")
    return f"{mant}e{int(exp)}"
