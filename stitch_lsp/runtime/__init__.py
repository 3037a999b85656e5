"""Runtime support imported by generated code: fast nvcc builds loaded through ctypes (no torch)."""

from stitch_lsp.runtime.fastcuda import (
    BuildResult,
    CompilerMessage,
    CudaBuildError,
    CudaLaunchError,
    build_cuda,
    check_launch,
    detect_arch,
    load_cuda,
    parse_compiler_output,
)

__all__ = [
    "BuildResult",
    "CompilerMessage",
    "CudaBuildError",
    "CudaLaunchError",
    "build_cuda",
    "check_launch",
    "detect_arch",
    "load_cuda",
    "parse_compiler_output",
]
