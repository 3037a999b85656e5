"""Calibrate the float64 oracle's thresholds on the CPU (no GPU needed).

Emulates, in fp32 on CPU tensors, what a reference and a candidate do on the GPU:
- the reference: a blocked reduction (256 strided partial sums, then a tree) and a BLAS GEMM;
- honest candidates: the same sums in other orders (sequential, reversed, 32 partial sums,
  contiguous chunks), a GEMM that accumulates sequentially with an FMA per step;
- downgrades: the inputs rounded to TF32 (10-bit mantissa), fp16 or bf16, then the same sums.

Each is compared with float64 as the Verifier does (tolerance units, on `get_inputs`-like
all-positive data and on the oracle's transforms). It prints the ratio of each candidate's
error to the reference's, the largest honest ratio and the smallest downgrade ratio.

    python benchmarks/precision_calibration.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitch_lsp.verify.worker.precision import (
    ORACLE_FACTOR,
    ORACLE_FLOOR,
    error_from,
    transform,
)

JUDGED = ("get_inputs", "signs", "range", "mantissa")
LABELS = ("get_inputs", "signs", "range", "mantissa", "scale", "mantissa+")
SUM_SIZES = (1024, 8192, 65536, 262144)
Fn = Callable[[torch.Tensor], torch.Tensor]


def inputs_for(label: str, values: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """get_inputs-like data, the oracle's transforms, and sign-preserving variants of them
    (`scale`, `mantissa+`: what a domain without sign changes would allow)."""
    if label == "get_inputs":
        return values
    if label.endswith("+") or label == "scale":
        base = {"scale": "range", "mantissa+": "mantissa"}[label]
        return [v.abs() for v in transform(base, values, seed)]
    return transform(label, values, seed)


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Round fp32 to `bits` explicit mantissa bits, to nearest even (what TF32 conversion does)."""
    drop = 23 - bits
    i = x.view(torch.int32)
    half = 1 << (drop - 1)
    lsb = (i >> drop) & 1
    r = (i + half - 1 + lsb) & ~((1 << drop) - 1)
    return r.view(torch.float32)


def tree(parts: torch.Tensor) -> torch.Tensor:
    """Pairwise sum over the last dim, in fp32."""
    while parts.shape[-1] > 1:
        if parts.shape[-1] % 2:
            parts = torch.cat([parts, torch.zeros_like(parts[..., :1])], -1)
        parts = parts[..., 0::2] + parts[..., 1::2]
    return parts[..., 0]


def sequential(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[:-1], dtype=torch.float32)
    for k in range(x.shape[-1]):
        acc = acc + x[..., k]
    return acc


def strided(threads: int) -> Fn:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        parts = x.reshape(*x.shape[:-1], n // threads, threads)  # element t + j*threads
        acc = torch.zeros(*x.shape[:-1], threads, dtype=torch.float32)
        for j in range(parts.shape[-2]):
            acc = acc + parts[..., j, :]
        return tree(acc)

    return f


def block_atomic(block: int) -> Fn:
    """Each block reduces `block` elements with a tree; the block sums are added one by one
    (an atomicAdd per block)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        parts = tree(x.reshape(*x.shape[:-1], n // block, block))
        return sequential(parts)

    return f


def chunked(chunks: int) -> Fn:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        parts = x.reshape(*x.shape[:-1], chunks, n // chunks)
        return tree(sequential(parts))

    return f


def gemm_blocked(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def gemm_sequential_fma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    a64, b64 = a.double(), b.double()
    for k in range(a.shape[1]):  # one FMA per step: exact product, one rounding to fp32
        acc = (acc + a64[:, k, None] * b64[None, k, :]).float().double()
    return acc.float()


def units(e64: torch.Tensor, y: torch.Tensor) -> float:
    return error_from(e64, y, 1e-4, 1e-4).tol_units


def run(seed: int) -> dict[str, object]:
    torch.manual_seed(seed)
    rows: list[dict[str, object]] = []
    lowp = {
        "tf32": lambda x: round_mantissa(x, 10),
        "fp16": lambda x: x.half().float(),
        "bf16": lambda x: x.bfloat16().float(),
    }
    # Sum over the last dim: KernelBench's reductions, norms' statistics, GEMM's K loop.
    for n in SUM_SIZES:
        base = torch.rand(16 if n > 65536 else 64, n)
        for label in LABELS:
            x = inputs_for(label, [base], seed)[0]
            e64 = x.double().sum(-1)
            ref = units(e64, strided(256)(x))
            honest = {
                "sequential": sequential(x),
                "reversed": sequential(x.flip(-1)),
                "strided32": strided(32)(x),
                "chunked16": chunked(16)(x),
                "block-atomic": block_atomic(256)(x),
            }
            for name, y in honest.items():
                rows.append(_row("sum", n, label, name, "honest", units(e64, y), ref))
            for name, rnd in lowp.items():
                y = strided(256)(rnd(x))
                rows.append(_row("sum", n, label, name, "downgrade", units(e64, y), ref))
    # GEMM (M x K) @ (K x N), the case: all-positive inputs.
    for k in (1024, 4096, 8192):
        a0, b0 = torch.rand(64, k), torch.rand(k, 64)
        for label in LABELS:
            a, b = inputs_for(label, [a0, b0], seed)
            e64 = a.double() @ b.double()
            ref = units(e64, gemm_blocked(a, b))
            y = gemm_sequential_fma(a, b)
            rows.append(_row("gemm", k, label, "sequential-fma", "honest", units(e64, y), ref))
            for name, rnd in lowp.items():
                y = gemm_blocked(rnd(a), rnd(b))
                rows.append(_row("gemm", k, label, name, "downgrade", units(e64, y), ref))
    return {"rows": rows}


def _row(
    op: str, n: int, inputs: str, cand: str, kind: str, c_units: float, r_units: float
) -> dict[str, object]:
    ratio = c_units / r_units if r_units > 0 else float("inf")
    flagged = c_units > ORACLE_FLOOR and c_units > ORACLE_FACTOR * r_units
    return {
        "op": op,
        "n": n,
        "inputs": inputs,
        "candidate": cand,
        "kind": kind,
        "candidate_units": c_units,
        "reference_units": r_units,
        "ratio": ratio,
        "flagged": flagged,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for seed in range(args.seeds):
        rows += run(seed)["rows"]  # type: ignore[operator]
    print(
        f"{'op':5} {'n':>6} {'inputs':10} {'candidate':15} {'cand units':>10} {'ref units':>10} "
        f"{'ratio':>8} flagged"
    )
    for r in rows:
        print(
            f"{r['op']:5} {r['n']:>6} {r['inputs']:10} {r['candidate']:15} "
            f"{r['candidate_units']:10.2e} {r['reference_units']:10.2e} {r['ratio']:8.1f} "
            f"{r['flagged']}"
        )
    judged = [r for r in rows if r["inputs"] in JUDGED]
    honest = [r for r in judged if r["kind"] == "honest"]
    print(f"\nthresholds: factor {ORACLE_FACTOR:g}, floor {ORACLE_FLOOR:g} tolerance units")
    print(
        f"on the input sets the Verifier judges ({', '.join(JUDGED)}): honest flagged "
        f"{sum(bool(r['flagged']) for r in honest)} of {len(honest)}; largest honest ratio "
        f"{max(float(r['ratio']) for r in honest):.1f}"
    )
    moved = [r for r in honest if r["inputs"] != "get_inputs"]
    inside = [r for r in honest if r["inputs"] == "get_inputs"]
    print(
        f"  largest honest ratio on the transforms {max(float(r['ratio']) for r in moved):.1f}; "
        f"on get_inputs {max(float(r['ratio']) for r in inside):.1f}, at most "
        f"{max(float(r['candidate_units']) for r in inside):.2f} tolerance units"
    )
    best: dict[tuple[object, ...], float] = {}
    caught: dict[tuple[object, ...], bool] = {}
    for r in judged:
        if r["kind"] != "downgrade":
            continue
        key = (r["op"], r["n"], r["candidate"])
        caught[key] = caught.get(key, False) or bool(r["flagged"])
        if float(r["candidate_units"]) > ORACLE_FLOOR:
            best[key] = max(best.get(key, 0.0), float(r["ratio"]))
    print(
        f"downgrades caught: {sum(caught.values())} of {len(caught)}; smallest best ratio "
        f"{min(best.values()):.1f}"
    )
    positive = [r for r in rows if r["inputs"] not in JUDGED and r["kind"] == "honest"]
    print(
        "sign-preserving variants (not judged): honest flagged "
        f"{sum(bool(r['flagged']) for r in positive)} of {len(positive)}"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
