"""Where cuBLAS's headers are, for compile checks on machines without a GPU."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path


def cublas_include() -> str | None:
    """ "" when the CUDA toolkit has them, the include folder of an installed nvidia-cublas wheel
    (CUDA 13: nvidia/cu13/include; CUDA 12: nvidia/cublas/include), or None."""
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        root = Path(nvcc).resolve().parent.parent
        for d in ("include", "targets/x86_64-linux/include"):
            if (root / d / "cublas_v2.h").is_file():
                return ""
    spec = importlib.util.find_spec("nvidia")
    for base in spec.submodule_search_locations or [] if spec else []:
        for sub in ("cu13/include", "cublas/include"):
            if (Path(base) / sub / "cublas_v2.h").is_file():
                return str((Path(base) / sub).resolve())
    return None
