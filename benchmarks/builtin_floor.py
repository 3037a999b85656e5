"""How close the builtin coder's kernels come to the byte floor on memory-bound problems.

For each problem: generate the candidate, check it against the eager reference, and time both
(CUDA events, L2 flushed before each run, median of N). The byte floor is (input + output bytes)
/ copy bandwidth, the bandwidth measured here with a 2 GiB device-to-device copy.

    python3 benchmarks/builtin_floor.py DIR/level1 --only 19,23,40 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from stitch_lsp.agents.builtin.generate import generate
from stitch_lsp.verify.timing import L2Flusher

DEFAULT = "19,23,24,33,36,40,42,47,51,88,94"


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
    ap.add_argument("folder")
    ap.add_argument("--only", default=DEFAULT)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    wanted = {w.strip() for w in args.only.split(",")}
    files = sorted(
        (p for p in Path(args.folder).glob("*.py") if p.name.split("_", 1)[0] in wanted),
        key=lambda p: int(p.name.split("_", 1)[0]),
    )
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s on {torch.cuda.get_device_name()}")
    flush = L2Flusher(torch.device("cuda"))
    rows = []
    tmp = Path(tempfile.mkdtemp())
    for f in files:
        cand = generate(f, f.name)
        if not cand.handled:
            print(f"{f.stem}: not handled: {cand.reason}")
            rows.append({"problem": f.stem, "handled": False, "reason": cand.reason})
            continue
        path = tmp / f"{f.stem}_builtin.py"
        path.write_text(cand.source or "")
        ref, new = _import(f, f"ref_{f.stem}"), _import(path, f"new_{f.stem}")
        torch.manual_seed(42)
        model = ref.Model(*ref.get_init_inputs()).cuda()
        torch.manual_seed(42)
        model_new = new.ModelNew(*ref.get_init_inputs()).cuda()
        with torch.device("cuda"):  # make the (multi-GB) inputs on the GPU directly
            inputs = list(ref.get_inputs())
        with torch.no_grad():
            want, got = model(*inputs), model_new(*inputs)
        ok = bool(torch.allclose(got.double(), want.double(), atol=1e-4, rtol=1e-4))
        nbytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
        nbytes += got.numel() * got.element_size()
        floor_ms = nbytes / bw * 1e3
        eager = _time(model, inputs, flush, args.runs)
        ours = _time(model_new, inputs, flush, args.runs)
        row = {
            "problem": f.stem,
            "handled": True,
            "correct": ok,
            "eager_ms": eager,
            "builtin_ms": ours,
            "floor_ms": floor_ms,
            "eager_vs_floor": eager / floor_ms,
            "builtin_vs_floor": ours / floor_ms,
            "speedup_vs_eager": eager / ours,
            "groups": [g.name + ": " + ", ".join(g.ops) for g in cand.groups],
        }
        rows.append(row)
        print(
            f"{f.stem}: correct={ok} eager {eager:.3f} ms ({eager / floor_ms:.2f}x floor), "
            f"builtin {ours:.3f} ms ({ours / floor_ms:.2f}x floor), speedup {eager / ours:.2f}x"
        )
        del model, model_new, inputs, want, got
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(
            json.dumps({"bandwidth_tbps": bw / 1e12, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
