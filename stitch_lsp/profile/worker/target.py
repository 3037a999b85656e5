"""The program ncu profiles for a `.py` file: `python -m stitch_lsp.profile.worker.target FILE.py`.

It imports a KernelBench-format file, builds the model with `get_init_inputs()`, warms it up,
and runs `forward` once between cudaProfilerStart/Stop, so that with `--profile-from-start off`
ncu sees only the model's own launches and not the build, the warm-up or torch's set-up.
This module runs in the GPU worker only; it is the one place in `profile` that imports torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any


def _load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"stitch_profile_target_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # By path only: the file's folder stays off sys.path, so nothing beside it (a `torch.py`)
    # is imported in place of a library.
    spec.loader.exec_module(module)
    return module


def _to_cuda(value: Any, torch: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cuda()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cuda(v, torch) for v in value)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stitch_lsp.profile.worker.target")
    parser.add_argument("path", type=Path)
    parser.add_argument("--class", dest="class_name", default=None)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only import the file (building its extensions), outside the profiler",
    )
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("stitch-profile: no CUDA GPU is visible to torch", file=sys.stderr)
        return 3
    module = _load_module(args.path.resolve())
    if args.prepare:
        print(f"stitch-profile: imported {args.path.name}")
        return 0
    name = args.class_name or ("ModelNew" if hasattr(module, "ModelNew") else "Model")
    cls = getattr(module, name, None)
    if cls is None:
        print(f"stitch-profile: {args.path} defines no class {name}", file=sys.stderr)
        return 2
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn, None)):
            print(f"stitch-profile: {args.path} defines no {fn}()", file=sys.stderr)
            return 2
    torch.manual_seed(args.seed)
    model = cls(*module.get_init_inputs()).cuda().eval()
    inputs = _to_cuda(list(module.get_inputs()), torch)
    with torch.no_grad():
        for _ in range(args.warmup):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    print(f"stitch-profile: ran {name}.forward once in the profiled range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
