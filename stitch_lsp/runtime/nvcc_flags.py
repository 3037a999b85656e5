"""The nvcc flags a candidate may ask for: code generation and diagnostics, nothing that runs,
links or writes elsewhere.

nvcc is a driver: `--run` executes what it built, `-ccbin` and `-Xcompiler -wrapper` pick
another program to run, `-o`, `-odir` and `--keep-dir` write outside the build folder,
`@file` and `--options-file` read more flags from a file. An allowlist is the only safe shape:
a flag is accepted when it matches one of the patterns below, whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_ALLOWED = [
    r"-O[0-3]?",
    r"-(-)?use_fast_math",
    r"-lineinfo|--generate-line-info",
    r"-std=c\+\+(14|17|20)|--std=c\+\+(14|17|20)",
    r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+\-]*)?",
    r"-U[A-Za-z_][A-Za-z0-9_]*",
    r"-I[^\s,;'\"`$]+",  # headers only: an #include in the source reads the same files
    r"-(-)?expt-relaxed-constexpr|-(-)?expt-extended-lambda",
    r"-(-)?extra-device-vectorization",
    r"-(-)?restrict",
    r"-(-)?resource-usage",
    r"-w|-Wno-deprecated-gpu-targets|-Wno-deprecated-declarations",
    r"-(-)?maxrregcount=[0-9]{1,3}",
    r"-(-)?(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
    r"-(-)?diag-suppress=[0-9,]+",
    r"-rdc=false|--relocatable-device-code=false",
    r"-(-)?default-stream=(per-thread|legacy)",
    r"-arch=(sm|compute)_[0-9]{2,3}[af]?",
    r"-(-)?gencode=arch=compute_[0-9]{2,3}[af]?,code=(sm|compute)_[0-9]{2,3}[af]?",
    r"-(Xptxas|-ptxas-options)=(-v|-O[0-3]|--warn-spills|-dlcm=(ca|cg)|--allow-expensive-optimizations=true)(,(-v|-O[0-3]|--warn-spills))*",
    r"-(Xcompiler|-compiler-options)=(-O[0-3]|-fPIC|-w|-Wall|-Wextra|-march=native|-fno-strict-aliasing)(,(-O[0-3]|-fPIC|-w|-Wall|-Wextra|-march=native|-fno-strict-aliasing))*",
    r"-l(cublas|cublasLt|cudart|curand|cusparse|cufft|cusolver|nvToolsExt|cuda)",
]
_PATTERN = re.compile("|".join(f"(?:{p})" for p in _ALLOWED))
_SPLIT = {"-Xptxas", "--ptxas-options", "-Xcompiler", "--compiler-options", "-maxrregcount"}
"""Flags that take their value as the next argument: joined with '=' before the check."""


class FlagRefused(ValueError):
    """A flag outside the allowlist, named."""


def checked_flags(flags: Sequence[str]) -> list[str]:
    """`flags` in nvcc's '=' form when every one is allowed; FlagRefused naming the first
    that is not."""
    out: list[str] = []
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        if not isinstance(flag, str):
            raise FlagRefused(f"nvcc flag {flag!r} is not a string")
        if flag in _SPLIT and i + 1 < len(items):
            flag = f"{flag}={items[i + 1]}"
            i += 1
        if "\0" in flag or "\n" in flag or not _PATTERN.fullmatch(flag):
            raise FlagRefused(
                f"nvcc flag {flag!r} is not allowed: candidates may pass optimisation, "
                "code-generation and warning flags only (-O3, --use_fast_math, -lineinfo, "
                "-D..., -arch=sm_90a, -Xptxas=-v, ...); nothing that runs, links or writes files"
            )
        out.append(flag)
        i += 1
    return out
