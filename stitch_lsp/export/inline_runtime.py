"""The runtime that a standalone copy carries: `stitch_lsp.runtime`'s API over `load_inline`.

This file is not imported by stitch-lsp: `stitch_lsp.export.standalone` copies the definitions a
generated file needs (by name, with what they use) into the standalone copy, in place of
`from stitch_lsp.runtime import ...`. So it must stay self-contained: standard library and torch
only, no name that generated code defines at module level, and annotations that Python 3.10
evaluates as they are (no `from __future__ import annotations`: KernelBench's harness prepends
lines to a candidate's source, after which a `__future__` import is a syntax error).

The fast path builds with nvcc alone and calls `extern "C"` launchers through ctypes. Here the
same source is built by `torch.utils.cpp_extension.load_inline`, which every PyTorch user (and
KernelBench's harness) has, at the price of compiling torch's headers (45-60 s on an H200
machine instead of about 2 s). Each launcher `extern "C" int name(T0 a0, ..., cudaStream_t s)`
gets a pybind11 entry point `name__py(int64_t/double ...)` that casts raw device pointers (the
`data_ptr()` integers the Python side already passes) back to their C types, so the generated
Python code calls the same names with the same arguments.
"""

import ctypes
import re
from typing import Any

_STITCH_LAUNCHER_RE = re.compile(r'extern\s+"C"\s+int\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{')
_STITCH_INT_TYPES = (
    "int",
    "unsigned",
    "long",
    "short",
    "size_t",
    "int64_t",
    "int32_t",
    "uint64_t",
    "uint32_t",
    "bool",
)


class CudaLaunchError(RuntimeError):
    """A launcher returned a non-zero cudaError_t."""

    def __init__(self, code: int, text: str, what: str = "") -> None:
        super().__init__(f"{what + ': ' if what else ''}CUDA error {code}: {text}")
        self.code = code


def _stitch_param_type(param: str) -> tuple[str, str, str]:
    """The C type of one parameter declaration (`const float* __restrict__ x` -> pointer)."""
    decl = param.replace("__restrict__", " ").strip()
    match = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", decl)
    ctype = (match.group(1) if match else decl).strip() or decl
    if "*" in ctype or ctype == "cudaStream_t":
        return ctype, "int64_t", f"reinterpret_cast<{ctype}>"
    if any(word in ("float", "double") for word in re.findall(r"\w+", ctype)):
        return ctype, "double", f"static_cast<{ctype}>"
    if any(word in _STITCH_INT_TYPES for word in re.findall(r"\w+", ctype)):
        return ctype, "int64_t", f"static_cast<{ctype}>"
    raise ValueError(f"launcher parameter of unsupported type: {param.strip()!r}")


def _stitch_bindings(source: str) -> tuple[str, str, list[str]]:
    """(C++ declarations, CUDA definitions, launcher names) for every `extern "C" int` launcher."""
    decls = ["#include <string>", "std::string stitch_cuda_error_string__py(int64_t code);"]
    defs = [
        "",
        "// ---- pybind11 entry points for the launchers above (added by the standalone export)",
        "std::string stitch_cuda_error_string__py(int64_t code) {",
        "  return cudaGetErrorString(static_cast<cudaError_t>(code));",
        "}",
    ]
    names: list[str] = []
    for name, params in _STITCH_LAUNCHER_RE.findall(source):
        args: list[str] = []
        casts: list[str] = []
        for i, param in enumerate(p for p in params.split(",") if p.strip()):
            _, py_type, cast = _stitch_param_type(param)
            args.append(f"{py_type} a{i}")
            casts.append(f"{cast}(a{i})")
        signature = f"int64_t {name}__py({', '.join(args)})"
        decls.append(signature + ";")
        defs += [signature + " {", f"  return {name}({', '.join(casts)});", "}"]
        names.append(name)
    return "\n".join(decls) + "\n", "\n".join(defs) + "\n", names


class _StitchLauncher:
    """Calls one entry point like the ctypes function it replaces: ctypes values are unwrapped,
    and `restype`/`argtypes` may be set (they are not needed here)."""

    def __init__(self, fn: Any, name: str) -> None:
        self._fn = fn
        self.__name__ = name
        self.restype: Any = None
        self.argtypes: Any = None

    def __call__(self, *args: Any) -> int:
        plain: list[Any] = []
        for a in args:
            if isinstance(a, ctypes._SimpleCData):
                a = a.value
            plain.append(0 if a is None else a)
        return self._fn(*plain)


class _StitchLibrary:
    """What `load_cuda` returns: the launchers as attributes, like the ctypes library."""

    def __init__(self, module: Any, names: list[str]) -> None:
        self._module = module
        for name in names:
            setattr(self, name, _StitchLauncher(getattr(module, f"{name}__py"), name))

    def stitch_cuda_error_string(self, code: int) -> bytes:
        return self._module.stitch_cuda_error_string__py(int(code)).encode()


def load_cuda(
    source: str,
    *,
    name: str,
    extra_flags: tuple[str, ...] | list[str] = (),
    libraries: tuple[str, ...] | list[str] = ("cublas", "cublasLt"),
    arch: str | None = None,
) -> _StitchLibrary:
    """Build `source` with load_inline (cached by torch under TORCH_EXTENSIONS_DIR) and return
    its launchers. `arch` is chosen by torch (TORCH_CUDA_ARCH_LIST or the current GPU)."""
    from torch.utils.cpp_extension import load_inline

    decls, defs, names = _stitch_bindings(source)
    module = load_inline(
        name=name,
        cpp_sources=[decls],
        cuda_sources=[source + "\n" + defs],
        functions=[f"{n}__py" for n in names] + ["stitch_cuda_error_string__py"],
        extra_cuda_cflags=["-O3", "-lineinfo", *extra_flags],
        extra_ldflags=[f"-l{lib}" for lib in libraries],
        verbose=False,
    )
    return _StitchLibrary(module, names)


def check_launch(code: int, lib: Any = None, what: str = "") -> None:
    """Raise CudaLaunchError when a launcher returned a non-zero cudaError_t."""
    if code == 0:
        return
    text = "unknown error"
    if lib is not None:
        try:
            raw = lib.stitch_cuda_error_string(int(code))
            text = raw.decode() if raw else text
        except AttributeError:
            pass
    raise CudaLaunchError(int(code), text, what)
