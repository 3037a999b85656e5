"""Build time of a typical generated fused kernel, and the Verifier's own overhead.

Measures, on one machine and in one run:
  * fastcuda (nvcc alone + ctypes): cold cache and warm cache, each in a fresh process, the way
    a verify worker meets it (the `load_cuda` call; the module import is reported apart);
  * torch's load_inline on the same kernel (with the torch binding it needs), cold and warm
    (the `load_inline` call, after `import torch`);
  * a full `verify()` of the honest candidate: wall time, phases, and the part of it that is
    not the candidate's own GPU time.

Usage: python benchmarks/verify_build.py --json out.json [--cold 3] [--warm 10] [--skip-load-inline]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "verify" / "data"
sys.path.insert(0, str(REPO))

from stitch_lsp.runtime.fastcuda import detect_arch  # noqa: E402


def kernel_source() -> str:
    """CUDA_SRC of the honest bias+ReLU candidate: what the builtin coder emits for a tail."""
    ns: dict[str, Any] = {}
    text = (DATA / "cand_good.py").read_text()
    start = text.index('CUDA_SRC = r"""')
    end = text.index('"""', start + 15) + 3
    exec(text[start:end], ns)
    return ns["CUDA_SRC"]


TORCH_WRAPPER = r"""
#include <ATen/cuda/CUDAContext.h>
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  auto y = torch::empty_like(x);
  int rc = launch_bias_relu(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                            x.numel(), (int)x.size(-1), at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(rc == 0, "launch failed: ", rc);
  return y;
}
"""

FAST_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from stitch_lsp.runtime import load_cuda
from stitch_lsp.runtime.fastcuda import recent_builds
t1 = time.perf_counter()
src = open(sys.argv[1]).read()
lib = load_cuda(src, name="bias_relu_bench")
t2 = time.perf_counter()
print(json.dumps({"seconds": t2 - t1, "with_import": t2 - t0,
                  "cached": recent_builds()[-1].cached}))
"""

INLINE_SNIPPET = """
import json, sys, time
import torch
from torch.utils.cpp_extension import load_inline
cuda_src = open(sys.argv[1]).read()
t0 = time.perf_counter()
mod = load_inline("bias_relu_inline_bench", cpp_sources=
    "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);",
    cuda_sources=cuda_src, functions=["bias_relu"], extra_cuda_cflags=["-O3", "-lineinfo"])
secs = time.perf_counter() - t0
x = torch.randn(64, 128, device="cuda"); b = torch.randn(128, device="cuda")
ok = torch.allclose(mod.bias_relu(x, b), torch.relu(x + b))
print(json.dumps({"seconds": secs, "correct": bool(ok)}))
"""


def _run_json(args: list[str], env: dict[str, str], timeout: float = 900) -> dict[str, Any]:
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_fastcuda(src_file: Path, cold: int, warm: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    colds, warms, warm_imports = [], [], []
    for _ in range(cold):
        with tempfile.TemporaryDirectory(prefix="stitch-bench-") as cache:
            env["STITCH_CACHE_DIR"] = cache
            r = _run_json([sys.executable, "-c", FAST_SNIPPET, str(src_file)], env)
            assert not r["cached"]
            colds.append(r["seconds"])
    with tempfile.TemporaryDirectory(prefix="stitch-bench-") as cache:
        env["STITCH_CACHE_DIR"] = cache
        _run_json([sys.executable, "-c", FAST_SNIPPET, str(src_file)], env)
        for _ in range(warm):
            r = _run_json([sys.executable, "-c", FAST_SNIPPET, str(src_file)], env)
            assert r["cached"]
            warms.append(r["seconds"])
            warm_imports.append(r["with_import"])
    return {
        "cold_median_s": statistics.median(colds),
        "cold_runs_s": colds,
        "warm_median_s": statistics.median(warms),
        "warm_runs_s": warms,
        "warm_with_import_median_s": statistics.median(warm_imports),
    }


def bench_load_inline(cuda_file: Path) -> dict[str, Any]:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="stitch-bench-ext-") as ext:
        env["TORCH_EXTENSIONS_DIR"] = ext
        cold = _run_json([sys.executable, "-c", INLINE_SNIPPET, str(cuda_file)], env)
        warm = _run_json([sys.executable, "-c", INLINE_SNIPPET, str(cuda_file)], env)
    return {"cold_s": cold["seconds"], "warm_s": warm["seconds"], "correct": cold["correct"]}


def bench_overhead(compare_compile: bool) -> dict[str, Any]:
    from stitch_lsp.config import Settings
    from stitch_lsp.verify import verify

    settings = Settings()
    res = verify(
        DATA / "ref_bias_relu.py",
        DATA / "cand_good.py",
        settings,
        compare_compile=compare_compile,
    )
    out: dict[str, Any] = {
        "status": res.status.value,
        "message": res.message,
        "wall_s": res.wall_seconds,
        "phases_s": res.phase_seconds,
        "compare_compile": compare_compile,
    }
    if res.timing and res.timing.candidate:
        # Candidate calls: correctness trials, 2 for the reuse check, 5 for the stream check,
        # warm-up and timed runs (+1 discarded).
        calls = settings.trials + 2 + 5 + 3 + settings.timing_trials + 1
        own = calls * res.timing.candidate.median / 1e3
        out.update(
            candidate_median_ms=res.timing.candidate.median,
            eager_median_ms=res.timing.eager.median if res.timing.eager else None,
            compiled_median_ms=res.timing.compiled.median if res.timing.compiled else None,
            candidate_calls=calls,
            candidate_own_s=own,
            overhead_s=res.wall_seconds - own,
            speedup_vs_eager=res.speedup_vs_eager,
            speedup_vs_compile=res.speedup_vs_compile,
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--skip-load-inline", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--compile-overhead", action="store_true", help="also time torch.compile")
    args = ap.parse_args()

    figures: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "host": platform.node(),
        "python": platform.python_version(),
        "arch": detect_arch(),
    }
    try:
        import torch

        figures["torch"] = torch.__version__
        if torch.cuda.is_available():
            figures["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        src_file = Path(tmp) / "kernel.cu"
        src_file.write_text(kernel_source())
        figures["fastcuda"] = bench_fastcuda(src_file, args.cold, args.warm)
        print("fastcuda", json.dumps(figures["fastcuda"]), flush=True)
        if not args.skip_load_inline:
            cuda_file = Path(tmp) / "inline.cu"
            cuda_file.write_text(kernel_source() + TORCH_WRAPPER)
            figures["load_inline"] = bench_load_inline(cuda_file)
            print("load_inline", json.dumps(figures["load_inline"]), flush=True)
            li, fc = figures["load_inline"], figures["fastcuda"]
            figures["cold_ratio"] = li["cold_s"] / fc["cold_median_s"]
            figures["warm_ratio"] = li["warm_s"] / fc["warm_median_s"]
    if not args.skip_overhead:
        figures["verify"] = bench_overhead(False)
        print("verify", json.dumps(figures["verify"]), flush=True)
        if args.compile_overhead:
            figures["verify_with_compile"] = bench_overhead(True)
            print("verify+compile", json.dumps(figures["verify_with_compile"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    fc = figures["fastcuda"]
    print(
        f"fastcuda cold {fc['cold_median_s']:.2f} s, warm {fc['warm_median_s']:.3f} s"
        + (
            f"; load_inline cold {figures['load_inline']['cold_s']:.1f} s, "
            f"warm {figures['load_inline']['warm_s']:.2f} s "
            f"({figures['cold_ratio']:.0f}x / {figures['warm_ratio']:.0f}x)"
            if "load_inline" in figures
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
