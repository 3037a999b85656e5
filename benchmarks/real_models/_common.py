"""What every real-model problem shares: the case it builds (size and dtype) and its inputs.

One problem file serves every case. Two environment variables choose it, read here only:

- `STITCH_MODEL_SIZE`: `small` (default; a tiny config and input that captures and runs on a
  CPU in seconds) or `full` (the realistic config and input, for GPU timing);
- `STITCH_MODEL_DTYPE`: `float32` (default), `bfloat16` or `float16`; the model and its float
  inputs are cast to it (token ids stay int64).

The problem files load this module by path (see their `_common()`), since the Verifier and the
builtin coder import a problem by its path from other folders, with nothing on `sys.path`. Only
`get_inputs` and `get_init_inputs` use it: `Model.__init__` takes the case as plain arguments,
because the builtin coder copies `Model`'s body into a candidate that lives elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import torch

SIZE_ENV = "STITCH_MODEL_SIZE"
DTYPE_ENV = "STITCH_MODEL_DTYPE"
SIZES = ("small", "full")
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def size() -> str:
    """The size case: `small` unless STITCH_MODEL_SIZE says `full`; anything else is refused."""
    raw = os.environ.get(SIZE_ENV, "small").strip().lower() or "small"
    if raw not in SIZES:
        raise ValueError(f"{SIZE_ENV}={raw!r}: expected one of {', '.join(SIZES)}")
    return raw


def dtype_name() -> str:
    """The dtype case, by name (`float32` unless STITCH_MODEL_DTYPE says otherwise)."""
    raw = os.environ.get(DTYPE_ENV, "float32").strip().lower() or "float32"
    raw = _ALIASES.get(raw, raw)
    if raw not in DTYPES:
        raise ValueError(f"{DTYPE_ENV}={raw!r}: expected one of {', '.join(DTYPES)}")
    return raw


def dtype() -> torch.dtype:
    return DTYPES[dtype_name()]


def init_inputs() -> list[Any]:
    """`[size, dtype name]`: what every suite `Model.__init__` takes. Also makes the model
    libraries importable here first (see `ensure_torchvision`), since `Model` imports them."""
    ensure_torchvision()
    return [size(), dtype_name()]


def pick(small: Any, full: Any) -> Any:
    """The value for the current size case."""
    return full if size() == "full" else small


def images(small: tuple[int, int], full: tuple[int, int] = (8, 224)) -> list[torch.Tensor]:
    """One batch of RGB images, `(batch, resolution)` per size, in the case's dtype."""
    batch, res = pick(small, full)
    return [torch.randn(batch, 3, res, res, dtype=dtype())]


def tokens(vocab: int, small: tuple[int, int], full: tuple[int, int]) -> list[torch.Tensor]:
    """One batch of token ids, `(batch, sequence length)` per size (int64: never cast)."""
    batch, seq = pick(small, full)
    return [torch.randint(0, vocab, (batch, seq), dtype=torch.long)]


_STUBS: list[Any] = []
"""The stub library below; a torch.library.Library drops its definitions when collected."""


def ensure_torchvision() -> None:
    """Let `import torchvision` work with the CPU torch wheel.

    PyPI's torchvision wheels are CUDA builds: with the CPU torch their C++ ops library cannot
    load, and torchvision's import then fails registering fake kernels for `nms` and `qnms`,
    which it does unguarded (timm and transformers import torchvision, so they fail too). Here,
    and only when that library cannot load, the two schemas are declared so the import goes
    through; the suite's models never call these detection ops (a call would raise "no
    kernel"). With a CUDA torch, or a torchvision whose ops load, nothing is done.
    """
    if _STUBS or "torchvision" in sys.modules or torch.version.cuda is not None:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    library = next(Path(spec.origin).parent.glob("_C*.so"), None)
    if library is not None:
        try:
            torch.ops.load_library(str(library))
            return
        except OSError:
            pass
    lib = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _STUBS.append(lib)
