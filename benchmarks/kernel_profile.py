"""Where a candidate's GPU time goes, kernel by kernel, beside the reference's.

For each problem: generate the builtin candidate, run reference and candidate under
torch.profiler (CUDA activity only, after warm-up), and print each side's total GPU time, its
launch count and its top kernels by total time. This is how a slow whole-model program is
diagnosed before anything is changed.

    python3 benchmarks/kernel_profile.py tests/data/kernelbench/level3 --only 33 --top 8
    STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 \
        python3 benchmarks/kernel_profile.py benchmarks/real_models/hf_gpt2.py --top 12
    python3 benchmarks/kernel_profile.py shared/kernelbench-dev/level2 --only 37 --compile
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builtin_speed import _import, problem_files

from stitch_lsp.compiler.worker.generate import generate


def kernels(fn: Any, args: list[Any], calls: int) -> dict[str, list[float]]:
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*args)
            torch.cuda.synchronize()
    out: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            out[ev.name].append(ev.device_time / calls)  # microseconds
    return out


def force_attention(model_new: Any, path: str) -> None:
    """Every attention site runs `path`: a choice whose clock makes that path the faster."""
    from stitch_lsp.runtime.choice import OURS, TimedChoice

    def timer(fn: Any, runs: int) -> float:
        # Each site's decision times ours, then the vendor's (counted before the call, so a
        # vendor that raises does not shift the next site's count).
        timer.calls += 1  # type: ignore[attr-defined]
        mine = timer.calls % 2 == 1  # type: ignore[attr-defined]
        fn()
        return 1.0 if mine == (path == OURS) else 10.0

    timer.calls = 0  # type: ignore[attr-defined]
    model_new.__dict__["_stitch_choice"] = TimedChoice(timer=timer)


def show(label: str, ks: dict[str, list[float]], calls: int, top: int) -> None:
    total = sum(sum(v) for v in ks.values())
    count = sum(len(v) for v in ks.values()) // calls
    print(f"  {label}: {total / 1000:.3f} ms of GPU time per call, {count} kernels per call")
    for name, times in sorted(ks.items(), key=lambda kv: -sum(kv[1]))[:top]:
        n = len(times) // calls
        each = sum(times) * calls / max(1, len(times))  # one launch, in microseconds
        print(f"    {sum(times) / 1000:8.3f} ms  {n:5d}x  {each:8.2f} us  {name[:110]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+", type=Path, help="problem folders or files")
    ap.add_argument("--only", help="comma-separated problem numbers (in folders)")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="also torch.compile's kernels")
    ap.add_argument(
        "--attention",
        choices=("timed", "ours", "vendor"),
        default="timed",
        help="which path each attention site runs: the timed choice (default), or one forced",
    )
    ap.add_argument("--no-reference", action="store_true", help="the candidate's kernels alone")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tmp = Path(tempfile.mkdtemp())
    files = [f for p in args.paths for f in (problem_files(p, args.only) if p.is_dir() else [p])]
    for f in files:
        cand = generate(f, f.name)
        print(f"{f.stem}:")
        if not cand.handled:
            print(f"  not handled: {cand.reason[:200]}")
            continue
        path = tmp / f"{f.stem}_builtin.py"
        path.write_text(cand.source or "")
        ref, new = _import(f, f"ref_{f.stem}"), _import(path, f"new_{f.stem}")
        torch.manual_seed(42)
        model = ref.Model(*ref.get_init_inputs()).cuda()
        torch.manual_seed(42)
        model_new = new.ModelNew(*ref.get_init_inputs()).cuda()
        inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
        if args.attention != "timed":
            force_attention(model_new, args.attention)
        if not args.no_reference:
            show("reference", kernels(model, inputs, args.calls), args.calls, args.top)
        show("candidate", kernels(model_new, inputs, args.calls), args.calls, args.top)
        if args.compile:
            show(
                "torch.compile",
                kernels(torch.compile(model), inputs, args.calls),
                args.calls,
                args.top,
            )
        runner = model_new._stitch_runner
        print(f"  candidate runner: {runner.mode} ({runner.reason})")
        choice = model_new.__dict__.get("_stitch_choice")
        if choice is not None:
            for site, times in choice.times_ms.items():
                mine, theirs = times["ours"] * 1000, times["vendor"] * 1000
                print(f"  attention {site}: ours {mine:.1f} us, sdpa {theirs:.1f} us (timed)")
            print(f"  attention picked: {sorted(set(choice.picked.values()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
