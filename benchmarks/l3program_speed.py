"""Whole-program candidates with and without CUDA graph replay, against eager and eager-in-a-graph.

For each problem: generate the candidate, check it against the eager reference (allclose 1e-4,
the same seed before both calls so random draws inside forward match), then time (CUDA events,
L2 flushed before each run, median of N):
  eager           the reference as it is;
  eager_graph     the reference captured in a torch.cuda.CUDAGraph, replayed with its input copy
                  and fresh outputs (clone) included: what a user gets by flipping that switch;
  ours            our candidate as generated (the runner replays where its rule says replay
                  pays for its copies; `mode` and `reason` say what it chose);
  graph           our candidate with STITCH_CUDA_GRAPH=force (replay even where the rule
                  would not);
  plain           our candidate with STITCH_CUDA_GRAPH=0 (every launch from the host);
  compile         torch.compile (default mode), only with --compile (slow to build);
  compile_ro      torch.compile(mode="reduce-overhead"), likewise. `--compile-jobs N` builds
                  both first in N processes, so the timed run takes them from Inductor's
                  on-disk caches.

The tolerance is KernelBench's for the problem's dtype: 1e-4 for float32, 1e-2 where the
reference's floating inputs or parameters are bfloat16 or float16. PATHS are problem folders
(numbered KernelBench files, `--only` picks numbers) or problem files (real models: their case
comes from STITCH_MODEL_SIZE / STITCH_MODEL_DTYPE). Generation runs in `--jobs` processes.

    python3 benchmarks/l3program_speed.py tests/data/kernelbench/level3 --only 35,39,8 --json o.json
    STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 \
        python3 benchmarks/l3program_speed.py benchmarks/real_models/[a-z]*.py --jobs 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builtin_speed import _import, prebuild, problem_files

from stitch_lsp.compiler.worker.generate import generate
from stitch_lsp.verify.worker.timing import L2Flusher


def tolerance(model: Any, inputs: list[Any]) -> float:
    """KernelBench's atol = rtol for the problem's precision."""
    floats = [
        t for t in [*inputs, *model.parameters()] if torch.is_tensor(t) and t.is_floating_point()
    ]
    half = any(t.dtype in (torch.bfloat16, torch.float16) for t in floats)
    return 1e-2 if half else 1e-4


def fp64_distances(model: Any, model_new: Any, inputs: list[Any], tol: float) -> dict[str, Any]:
    """On a miss: the largest distance of the candidate and of the reference itself from the
    reference run in float64 (same weights), first output, in absolute terms and in tolerance
    units; a deep bf16 network's eager result is itself far from the exact answer, and
    `oracle_cleared` says whether ours is no further (the Verifier's rule for bf16/fp16,
    precision.within_reference_error). A bf16/fp16 reference that cannot run in float64
    (torch._grouped_mm in transformers' mixture-of-experts layers) is measured against its
    float32 run instead; `oracle_dtype` names the precision used, `fp64_note` why not float64."""
    from stitch_lsp.verify.worker import precision

    row: dict[str, Any] = {}
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            ref = _flat(model(*inputs))[0]
            torch.manual_seed(0)
            new = _flat(model_new(*inputs))[0]
        for dtype in precision.oracle_dtypes(ref.dtype):
            try:
                copy = precision.oracle_model(model, dtype)
                torch.manual_seed(0)
                exact = precision.run_in(copy, inputs, dtype)[0]
                del copy
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as exc:  # no kernel in this dtype: the next one, if any
                row.setdefault("fp64_note", f"{type(exc).__name__}: {exc}"[:200])
                continue
            cand = precision.error_from(exact, new, tol, tol)
            own = precision.error_from(exact, ref, tol, tol)
            reduced = ref.dtype in precision.REDUCED_DTYPES
            return row | {
                "oracle_dtype": precision.dtype_name(dtype),
                "candidate_fp64_err": cand.max_abs,
                "reference_fp64_err": own.max_abs,
                "fp64_scale": float(exact.abs().max()),
                "candidate_fp64_mean_err": cand.mean_abs,
                "reference_fp64_mean_err": own.mean_abs,
                "candidate_tol_units": cand.tol_units,
                "reference_tol_units": own.tol_units,
                "oracle_cleared": reduced and precision.within_reference_error(cand, own),
            }
    except Exception as exc:  # out of memory, no floating output: the miss stands as it is
        row["fp64_note"] = f"{type(exc).__name__}: {exc}"[:200]
    return row


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _time(fn: Any, args: list[Any], flush: L2Flusher, runs: int) -> float:
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        samples = []
        for _ in range(runs):
            flush()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*args)
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b))
    return statistics.median(samples)


def eager_graph(model: Any, inputs: list[Any]) -> Any:
    """The reference under a CUDA graph: static inputs filled by a copy, outputs cloned."""
    static = [x.clone() for x in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):
            model(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out = _flat(model(*static))

    def run(*xs: Any) -> list[Any]:
        for s, x in zip(static, xs, strict=True):
            s.copy_(x)
        graph.replay()
        return [o.clone() for o in out]

    return run


def measure(ref: Any, new: Any, flush: L2Flusher, runs: int, with_compile: bool) -> dict:  # type: ignore[type-arg]
    torch.manual_seed(42)
    model = ref.Model(*ref.get_init_inputs()).cuda()
    torch.manual_seed(42)
    model_new = new.ModelNew(*ref.get_init_inputs()).cuda()
    torch.manual_seed(0)
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
    worst = 0.0
    tol = tolerance(model, inputs)
    with torch.no_grad():
        for call in range(3):  # warm-up, capture, replay
            torch.manual_seed(call)
            want = _flat(model(*inputs))
            torch.manual_seed(call)
            got = _flat(model_new(*inputs))
            for g, w in zip(got, want, strict=True):
                if not torch.allclose(g, w, atol=tol, rtol=tol):
                    worst = max(worst, float((g.float() - w.float()).abs().max()))
    row: dict[str, Any] = {"correct": worst == 0.0, "max_err_beyond_tol": worst, "tol": tol}
    if worst:
        row.update(fp64_distances(model, model_new, inputs, tol))
    row["mode"] = model_new._stitch_runner.mode
    row["reason"] = model_new._stitch_runner.reason
    choice = model_new.__dict__.get("_stitch_choice")
    if choice is not None:  # attention sites: ours or sdpa, as the warm-up call timed them
        row["attention_picked"] = dict(choice.picked)
        row["attention_ms"] = dict(choice.times_ms)
    row["eager_ms"] = _time(model, inputs, flush, runs)
    try:
        row["eager_graph_ms"] = _time(eager_graph(model, inputs), inputs, flush, runs)
    except RuntimeError as exc:  # e.g. a reference that copies from the CPU inside forward
        torch.cuda.synchronize()
        row["eager_graph_note"] = f"{type(exc).__name__}: {exc}"[:200]
    row["ours_ms"] = _time(model_new, inputs, flush, runs)
    try:
        os.environ["STITCH_CUDA_GRAPH"] = "force"
        model_new.__dict__.pop("_stitch_runner", None)  # a fresh runner: no remembered choice
        row["graph_ms"] = _time(model_new, inputs, flush, runs)
        os.environ["STITCH_CUDA_GRAPH"] = "0"
        row["plain_ms"] = _time(model_new, inputs, flush, runs)
    finally:
        os.environ["STITCH_CUDA_GRAPH"] = "1"
    if with_compile:
        for key, mode in (("compile_ms", "default"), ("compile_ro_ms", "reduce-overhead")):
            try:
                torch._dynamo.reset()
                compiled = torch.compile(model, mode=mode)
                row[key] = _time(compiled, inputs, flush, runs)
            except Exception as exc:
                row[key.replace("_ms", "_note")] = f"{type(exc).__name__}: {exc}"[:200]
    baselines = ("eager_ms", "eager_graph_ms", "compile_ms", "compile_ro_ms")
    best = min(v for k, v in row.items() if k in baselines)
    row["speedup_vs_eager"] = row["eager_ms"] / row["ours_ms"]
    row["speedup_vs_best"] = best / row["ours_ms"]
    row["graph_vs_plain"] = row["plain_ms"] / row["graph_ms"]
    # Did the rule choose the faster of the two? (within 2%: timing noise)
    chose = row["graph_ms"] if row["mode"] == "replay" else row["plain_ms"]
    row["rule_chose_faster"] = chose <= 1.02 * min(row["graph_ms"], row["plain_ms"])
    return row


def _generate_one(f: Path) -> Any:
    return generate(f, f.name)


def generate_all(files: list[Path], jobs: int) -> dict[Path, Any]:
    """The builtin candidate of each file, in `jobs` processes (forked before CUDA starts)."""
    if jobs <= 1:
        return {f: generate(f, f.name) for f in files}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
        return dict(zip(files, ex.map(_generate_one, files), strict=True))


def _warm_compile(f: Path) -> str:
    """Compile one problem's reference in both modes and run it once, in a child process, so
    that the timed run's builds come from Inductor's caches (shared on disk)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        ref = _import(f, f"warm_{f.stem}")
        torch.manual_seed(42)
        model = ref.Model(*ref.get_init_inputs()).cuda()
        torch.manual_seed(0)
        inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
    except Exception as exc:
        return f"{f.stem} not warmed: {type(exc).__name__}: {exc}"[:200]
    notes = []
    for mode in ("default", "reduce-overhead"):
        try:
            torch._dynamo.reset()
            with torch.no_grad():
                for _ in range(2):
                    torch.compile(model, mode=mode)(*inputs)
            torch.cuda.synchronize()
        except Exception as exc:  # the timed run records it
            notes.append(f"{mode}: {type(exc).__name__}")
    return f"{f.stem} warmed {', '.join(notes) or 'ok'}"


def warm_compile_all(files: list[Path], jobs: int, seconds: float) -> None:
    """torch.compile's builds for every problem in `jobs` spawned processes, before timing;
    after `seconds` the rest is left to the timed run (which then builds them itself)."""
    import multiprocessing
    import time

    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, 16 // jobs)))
    deadline = time.monotonic() + seconds
    pool = multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1)
    try:
        results = pool.imap_unordered(_warm_compile, files)
        for _ in files:
            print(results.next(timeout=max(1.0, deadline - time.monotonic())), flush=True)
    except multiprocessing.TimeoutError:
        print(f"compile warm-up stopped after {seconds:.0f} s", flush=True)
    finally:
        pool.terminate()
        pool.join()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+", type=Path, help="problem folders or files")
    ap.add_argument("--only", help="comma-separated problem numbers (in folders)")
    ap.add_argument("--jobs", type=int, default=1, help="generator processes")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument(
        "--compile", action="store_true", help="also time torch.compile and reduce-overhead"
    )
    ap.add_argument(
        "--compile-jobs",
        type=int,
        default=0,
        help="with --compile: build torch.compile's programs in this many processes first",
    )
    ap.add_argument(
        "--compile-warm-seconds", type=float, default=300, help="time limit of that warm-up"
    )
    ap.add_argument(
        "--without-rewrite",
        action="append",
        default=[],
        metavar="NAME",
        help="generate without this catalogue entry (compiler/rewrites/), to time what it buys",
    )
    ap.add_argument("--json")
    ap.add_argument(
        "--resume", action="store_true", help="keep the rows already in --json and skip them"
    )
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    files = [f for p in args.paths for f in (problem_files(p, args.only) if p.is_dir() else [p])]
    rows: list[dict[str, Any]] = []
    if args.resume and args.json and Path(args.json).is_file():
        rows = json.loads(Path(args.json).read_text())
        done = {r["problem"] for r in rows}
        files = [f for f in files if f.stem not in done]
    if args.without_rewrite:  # before the generator processes fork
        from stitch_lsp.compiler import rewrites

        rewrites.CATALOGUE = tuple(
            r for r in rewrites.CATALOGUE if r.name not in set(args.without_rewrite)
        )
    cands = generate_all(files, args.jobs)
    if args.compile and args.compile_jobs > 0:
        warm_compile_all(
            [f for f in files if cands[f].handled], args.compile_jobs, args.compile_warm_seconds
        )
    prebuild([c.source for c in cands.values() if c.source], 14)
    flush = L2Flusher(torch.device("cuda"))
    tmp = Path(tempfile.mkdtemp())
    for f in files:
        cand = cands[f]
        if not cand.handled:
            print(f"{f.stem}: not handled: {cand.reason[:200]}")
            rows.append({"problem": f.stem, "handled": False, "reason": cand.reason})
            continue
        path = tmp / f"{f.stem}_builtin.py"
        path.write_text(cand.source or "")
        try:
            row = measure(
                _import(f, f"ref_{f.stem}"),
                _import(path, f"new_{f.stem}"),
                flush,
                args.runs,
                args.compile,
            )
        except Exception as exc:  # one broken problem must not end the run
            print(f"{f.stem}: FAILED {type(exc).__name__}: {exc}")
            rows.append({"problem": f.stem, "handled": True, "error": str(exc)[:500]})
            if "CUDA error" in str(exc):  # the context is lost: --resume goes on in a new process
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=2))
                return 3
            continue
        row = {"problem": f.stem, "handled": True, **row}
        rows.append(row)
        print(
            f"{f.stem}: correct={row['correct']} mode={row['mode']} eager {row['eager_ms']:.3f} "
            f"eager_graph {row.get('eager_graph_ms', float('nan')):.3f} ours {row['ours_ms']:.3f} "
            f"(replay {row['graph_ms']:.3f}, plain {row['plain_ms']:.3f})"
            + "".join(
                f" {k[:-3]} {row[k]:.3f}" for k in ("compile_ms", "compile_ro_ms") if k in row
            )
            + " ms; "
            f"vs eager {row['speedup_vs_eager']:.2f}x, vs best {row['speedup_vs_best']:.2f}x, "
            f"graph gain {row['graph_vs_plain']:.2f}x, rule chose the faster: "
            f"{row['rule_chose_faster']}"
        )
        if row.get("attention_picked"):
            picks = list(row["attention_picked"].values())
            print(
                f"  {f.stem}: attention sites run sdpa at {picks.count('vendor')} of {len(picks)}"
            )
        if not row["correct"]:
            print(
                f"  {f.stem}: beyond tolerance by {row['max_err_beyond_tol']:.3g}; from "
                f"{row.get('oracle_dtype', 'float64')}: "
                f"ours {row.get('candidate_fp64_err', float('nan')):.3g}, the reference "
                f"{row.get('reference_fp64_err', float('nan')):.3g} (scale "
                f"{row.get('fp64_scale', float('nan')):.3g}); no further than the reference: "
                f"{row.get('oracle_cleared', False)} {row.get('fp64_note', '')}"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        del row
        torch.cuda.empty_cache()
    ok = [r for r in rows if r.get("correct")]
    if ok:
        for key in ("speedup_vs_eager", "speedup_vs_best", "graph_vs_plain"):
            geo = statistics.geometric_mean([r[key] for r in ok])
            print(f"geomean {key} over {len(ok)} correct: {geo:.3f}x")
        right = sum(1 for r in ok if r["rule_chose_faster"])
        print(f"the replay rule chose the faster way for {right} of {len(ok)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
