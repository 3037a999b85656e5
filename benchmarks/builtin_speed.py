"""Builtin coder speed against eager PyTorch, and against the byte floor, without torch.compile.

For each problem: generate the candidate, check it against the eager reference (allclose 1e-4),
and time both (CUDA events, L2 flushed before each run, median of N). The byte floor is (input +
output bytes) / copy bandwidth, the bandwidth measured here with a 2 GiB device-to-device copy;
it is a bound only for memory-bound problems. All candidates are built in parallel first.
`stitch-lsp bench` gives the full Verifier protocol (and torch.compile), at ~20-60 s a problem.

    python3 benchmarks/builtin_speed.py DIR/level2 DIR/level1/19_ReLU.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from stitch_lsp.compiler.worker.generate import generate
from stitch_lsp.verify.worker.timing import L2Flusher

_NAME = re.compile(r'load_cuda\(CUDA_SOURCE, name="(\w+)",\s*libraries=\(([^)]*)\)\)')


def prebuild(sources: list[str], threads: int) -> None:
    """Build every candidate's CUDA at once (nvcc runs in parallel; the cache keeps them)."""
    from concurrent.futures import ThreadPoolExecutor

    from stitch_lsp.runtime import build_cuda

    def one(src: str) -> None:
        m = _NAME.search(src)
        cuda = re.search(r"CUDA_SOURCE = r'''(.*?)'''", src, re.S)
        if m and cuda:
            libs = tuple(x.strip().strip("'\"") for x in m.group(2).split(",") if x.strip())
            try:
                build_cuda(cuda.group(1), name=m.group(1), libraries=libs)
            except Exception as exc:  # the timed run reports it
                print(f"prebuild {m.group(1)}: {exc}")

    with ThreadPoolExecutor(max_workers=threads) as ex:
        list(ex.map(one, sources))


def problem_files(folder: Path, only: str | None) -> list[Path]:
    """KernelBench problems in `folder`, by number; `only`: comma-separated numbers to keep."""
    wanted = {w.strip() for w in only.split(",")} if only else None
    return sorted(
        (p for p in folder.glob("*.py") if wanted is None or p.name.split("_", 1)[0] in wanted),
        key=lambda p: int(p.name.split("_", 1)[0]),
    )


def _import(path: Path, name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _time(fn, args, flush: L2Flusher, runs: int) -> float:  # type: ignore[no-untyped-def]
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


def copy_bandwidth() -> float:
    src = torch.empty(1 << 29, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    flush = L2Flusher(torch.device("cuda"))
    ms = _time(lambda: dst.copy_(src), (), flush, 10)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="+", help="problem folders and/or problem files")
    ap.add_argument("--only", help="comma-separated problem numbers (default: all)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--threads", type=int, default=8, help="parallel nvcc builds")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    files: list[Path] = []
    for target in map(Path, args.targets):
        files += [target] if target.is_file() else problem_files(target, args.only)
    cands = {f: generate(f, f.name) for f in files}
    prebuild([c.source for c in cands.values() if c.source], args.threads)
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s on {torch.cuda.get_device_name()}")
    flush = L2Flusher(torch.device("cuda"))
    rows = []
    tmp = Path(tempfile.mkdtemp())
    for f in files:
        cand = cands[f]
        if not cand.handled:
            print(f"{f.stem}: not handled: {cand.reason}")
            rows.append(
                {"problem": f"{f.parent.name}/{f.stem}", "handled": False, "reason": cand.reason}
            )
            continue
        path = tmp / f"{f.parent.name}_{f.stem}_builtin.py"
        path.write_text(cand.source or "")
        key = f"{f.parent.name}_{f.stem}"
        ref, new = _import(f, f"ref_{key}"), _import(path, f"new_{key}")
        try:
            row = measure(ref, new, flush, bw, args.runs)
        except Exception as exc:  # one broken problem must not end the run
            print(f"{f.stem}: FAILED {type(exc).__name__}: {exc}")
            rows.append(
                {
                    "problem": f"{f.parent.name}/{f.stem}",
                    "handled": True,
                    "correct": False,
                    "error": str(exc),
                }
            )
            continue
        row = {"problem": f"{f.parent.name}/{f.stem}", **row}
        row["groups"] = [g.name + ": " + ", ".join(g.ops) for g in cand.groups]
        rows.append(row)
        save(args.json, bw, rows)
        print(
            f"{f.stem}: correct={row['correct']} eager {row['eager_ms']:.3f} ms "
            f"({row['eager_vs_floor']:.2f}x floor), builtin {row['builtin_ms']:.3f} ms "
            f"({row['builtin_vs_floor']:.2f}x floor), speedup {row['speedup_vs_eager']:.3f}x"
        )
        torch.cuda.empty_cache()
    ok = [r for r in rows if r.get("correct")]
    if ok:
        geo = statistics.geometric_mean([r["speedup_vs_eager"] for r in ok])
        print(f"correct {len(ok)}/{len(rows)}, geomean speedup vs eager {geo:.3f}x")
    save(args.json, bw, rows)
    return 0


def save(path: str | None, bw: float, rows: list[dict]) -> None:  # type: ignore[type-arg]
    if path:
        Path(path).write_text(json.dumps({"bandwidth_tbps": bw / 1e12, "rows": rows}, indent=2))


def measure(ref, new, flush: L2Flusher, bw: float, runs: int) -> dict:  # type: ignore[no-untyped-def]
    """Seeded twins on the GPU, one correctness check, then eager and builtin timings."""
    torch.manual_seed(42)
    with torch.device("cuda"):
        model = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(42)
    with torch.device("cuda"):
        model_new = new.ModelNew(*ref.get_init_inputs())
    torch.manual_seed(0)
    with torch.device("cuda"):  # make the (multi-GB) inputs on the GPU directly
        inputs = list(ref.get_inputs())
    with torch.no_grad():
        want, got = model(*inputs), model_new(*inputs)
    ok = bool(torch.allclose(got.double(), want.double(), atol=1e-4, rtol=1e-4))
    nbytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    nbytes += got.numel() * got.element_size()
    floor_ms = nbytes / bw * 1e3
    eager = _time(model, inputs, flush, runs)
    ours = _time(model_new, inputs, flush, runs)
    return {
        "handled": True,
        "correct": ok,
        "eager_ms": eager,
        "builtin_ms": ours,
        "floor_ms": floor_ms,
        "eager_vs_floor": eager / floor_ms,
        "builtin_vs_floor": ours / floor_ms,
        "speedup_vs_eager": eager / ours,
    }


if __name__ == "__main__":
    sys.exit(main())
