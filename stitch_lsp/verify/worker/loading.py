"""Import reference and candidate files inside the worker, and watch every CUDA build they do.

Candidates build their CUDA in three ways: `torch.utils.cpp_extension.load_inline` / `load`
(KernelBench's format), or `stitch_lsp.runtime.load_cuda` (what stitch-lsp generates). We wrap
the torch entry points while the candidate is imported so that a failed build becomes a
`BuildFailure` whose messages point at the user's document, and, with no GPU, so that
`load_inline` compiles its sources with nvcc -c against torch's headers instead of linking an
extension that could not run anyway.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import BuildInfo
from stitch_lsp.runtime import fastcuda
from stitch_lsp.runtime.fastcuda import CompilerMessage, CudaBuildError, parse_compiler_output
from stitch_lsp.verify.literals import NotLiteral, literal_value
from stitch_lsp.verify.source_map import map_line

# c10/cuda/impl/cuda_cmake_macros.h is generated when torch is built with CUDA; the CPU wheel
# ships the headers that include it but not the file itself.
_CMAKE_MACROS_SHIM = "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"
_TORCH_CUDA_PRELUDE = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
_TORCH_CPP_PRELUDE = ["#include <torch/extension.h>"]
LOG_TAIL_CHARS = 4000


class BuildFailure(Exception):
    """A candidate's CUDA did not build. `findings` are located in the user's documents."""

    def __init__(self, message: str, findings: list[Finding], info: BuildInfo):
        super().__init__(message)
        self.findings = findings
        self.info = info


@dataclass
class BuildWatch:
    """Builds seen while a candidate was imported and run."""

    document: Path
    compile_only: bool
    builds: list[BuildInfo] = field(default_factory=list)
    # The CUDA and C++ texts the candidate built, so its own kernels can be told apart from
    # vendor and PyTorch kernels in the timeline (attribution).
    sources: list[str] = field(default_factory=list)

    def summary(self) -> BuildInfo:
        fast = [
            BuildInfo(
                kind="fastcuda",
                name=r.path.stem.rsplit("-", 1)[0],
                seconds=r.seconds,
                cached=r.cached,
                arch=r.arch,
                command=r.command,
                log_tail=r.log[-LOG_TAIL_CHARS:],
                compile_only=self.compile_only,
            )
            for r in fastcuda.recent_builds()
        ]
        all_builds = self.builds + fast
        if not all_builds:
            return BuildInfo(kind="none", compile_only=self.compile_only)
        if len(all_builds) == 1:
            return all_builds[0]
        first = all_builds[0]
        return first.model_copy(
            update={
                "name": ",".join(b.name for b in all_builds),
                "seconds": sum(b.seconds for b in all_builds),
                "cached": all(b.cached for b in all_builds),
            }
        )


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    return text[-limit:]


def findings_from_messages(
    messages: list[CompilerMessage], document: Path, compiled: str, *, fallback: str
) -> list[Finding]:
    """Compiler messages (in `compiled`'s lines) -> Findings on the user's document."""
    out: list[Finding] = []
    for m in messages:
        if m.severity not in ("error", "warning"):
            continue
        if m.file is not None and not Path(m.file).name.startswith(("cuda.cu", "main.cpp")):
            # A message about some header: keep it, but point at the document's CUDA.
            line = map_line(document, compiled, None)
            text = f"{m.file}:{m.line}: {m.message}"
        else:
            line = map_line(document, compiled, m.line)
            text = m.message
        out.append(
            Finding(
                path=str(document),
                line=line,
                column=m.column if (m.column and m.file is None) else 1,
                severity=Severity.error if m.severity == "error" else Severity.warning,
                code="nvcc",
                message=text,
                source="stitch-verify",
            )
        )
    if not any(f.severity is Severity.error for f in out):
        out.append(
            Finding(
                path=str(document),
                line=map_line(document, compiled, None),
                severity=Severity.error,
                code="nvcc",
                message=fallback,
                source="stitch-verify",
            )
        )
    return out


def fastcuda_failure(exc: CudaBuildError, document: Path) -> BuildFailure:
    compiled = exc.source or ""
    findings = findings_from_messages(
        exc.diagnostics, document, compiled, fallback=exc.message or str(exc)
    )
    info = BuildInfo(kind="fastcuda", name=exc.name, log_tail=tail(exc.log))
    return BuildFailure(str(exc), findings, info)


def import_file(path: Path, module_name: str) -> types.ModuleType:
    """Import a Python file, by path, as a fresh module.

    Its folder is not put on sys.path: the worker imports exactly this file, and a file beside
    it named like a library (`torch.py`, `triton.py`) is never imported in its place.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- torch builds


def _nvcc_compile_only(
    text: str, filename: str, *, extra: list[str], include_paths: list[str]
) -> tuple[bool, str, float, bool]:
    """nvcc -c of one load_inline source against torch's headers. Cached by content."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS
    from torch.utils.cpp_extension import include_paths as torch_includes

    nvcc = fastcuda.find_nvcc()
    if nvcc is None:
        raise CudaBuildError("nvcc not found: cannot compile the candidate's CUDA")
    arch = fastcuda.detect_arch()
    cache = fastcuda.cache_dir() / "compile-only"
    cache.mkdir(parents=True, exist_ok=True)
    shim = cache / "shim"
    macros = shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    if not macros.is_file():
        macros.parent.mkdir(parents=True, exist_ok=True)
        partial = macros.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(_CMAKE_MACROS_SHIM)
        os.replace(partial, macros)
    incs = [str(shim), *torch_includes(), sysconfig.get_paths()["include"], *include_paths]
    lang = [] if filename.endswith(".cu") else ["-x", "cu"]
    flags = [
        "-c",
        "-O3",
        "-lineinfo",
        "-std=c++20",
        "-Xcompiler",
        "-fPIC",
        *fastcuda.gencode_flags(arch),
        *COMMON_NVCC_FLAGS,
        "-DTORCH_EXTENSION_NAME=stitch_compile_only",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        *(f"-I{p}" for p in incs),
        *extra,
        *lang,
    ]
    key = hashlib.sha256(
        "\0".join([text, *flags, fastcuda.nvcc_version(nvcc)]).encode()
    ).hexdigest()
    # The outcome (either way) is a function of the text, the flags and the toolchain.
    ok_marker = cache / f"{key[:32]}.ok"
    fail_marker = cache / f"{key[:32]}.fail"
    for marker, ok in ((ok_marker, True), (fail_marker, False)):
        if marker.is_file():
            return ok, marker.read_text(), 0.0, True
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stitch-co-") as tmp:
        src = Path(tmp) / filename
        src.write_text(text)
        cmd = [nvcc, *flags, str(src), "-o", str(Path(tmp) / "out.o")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return False, "nvcc -c timed out after 900 s", time.perf_counter() - start, False
        log = (proc.stdout + proc.stderr).replace(tmp + "/", "")
    seconds = time.perf_counter() - start
    marker = ok_marker if proc.returncode == 0 else fail_marker
    marker_tmp = marker.with_suffix(f".{os.getpid()}.tmp")
    marker_tmp.write_text(log[-4 * LOG_TAIL_CHARS :])
    os.replace(marker_tmp, marker)
    return proc.returncode == 0, log, seconds, False


class _CompileOnlyExtension(types.ModuleType):
    """What `load_inline` returns when nothing can run: any call says so plainly."""

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)

        def unavailable(*_a: Any, **_k: Any) -> Any:
            raise RuntimeError("built compile-only (no GPU): the extension cannot run here")

        return unavailable


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


@contextlib.contextmanager
def watch_torch_builds(watch: BuildWatch) -> Iterator[None]:
    """Wrap `load_inline`, `load` and `load_cuda`'s builds for the duration of the candidate's
    import and run: failures point at the document, and every source is noted."""
    real_build = fastcuda.build_cuda

    def build_cuda(source: str, *args: Any, **kw: Any) -> Any:
        watch.sources.append(source)
        return real_build(source, *args, **kw)

    fastcuda.build_cuda = build_cuda
    try:
        with _watch_torch(watch):
            yield
    finally:
        fastcuda.build_cuda = real_build


@contextlib.contextmanager
def _watch_torch(watch: BuildWatch) -> Iterator[None]:
    try:
        import torch.utils.cpp_extension as cpp_ext
    except ImportError:
        yield
        return

    real_inline = cpp_ext.load_inline
    real_load = cpp_ext.load

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kw: Any):
        cpp = _as_list(cpp_sources)
        cuda = _as_list(cuda_sources)
        watch.sources.extend(cuda + cpp)
        implicit = not kw.get("no_implicit_headers", False)
        cuda_text = "\n".join((_TORCH_CUDA_PRELUDE if implicit else []) + cuda)
        cpp_text = "\n".join((_TORCH_CPP_PRELUDE if implicit else []) + cpp)
        start = time.perf_counter()
        if watch.compile_only:
            return _load_inline_compile_only(name, cpp_text, cuda_text if cuda else "", kw, watch)
        if cuda:
            kw = with_lineinfo(kw)
        try:
            result = real_inline(name, cpp_sources, cuda_sources, *args, **kw)
        except Exception as exc:  # torch raises RuntimeError with the ninja output inside
            log = str(exc)
            messages = parse_compiler_output(log, "cuda.cu")
            cpp_msgs = parse_compiler_output(log, "main.cpp")
            findings = findings_from_messages(
                [m for m in messages if m.file is None],
                watch.document,
                cuda_text,
                fallback=f"load_inline({name!r}) failed: {log.strip().splitlines()[0][:300]}"
                if log.strip()
                else f"load_inline({name!r}) failed",
            )
            cpp_only = [m for m in cpp_msgs if m.file is None]
            if cpp_only:
                findings = [
                    *findings_from_messages(cpp_only, watch.document, cpp_text, fallback=""),
                    *(f for f in findings if "failed" not in f.message),
                ]
            info = BuildInfo(
                kind="load_inline",
                name=name,
                seconds=time.perf_counter() - start,
                log_tail=tail(log),
            )
            raise BuildFailure(f"load_inline({name!r}) failed to build", findings, info) from exc
        watch.builds.append(
            BuildInfo(
                kind="load_inline",
                name=name,
                seconds=time.perf_counter() - start,
                arch=os.environ.get("TORCH_CUDA_ARCH_LIST"),
                command=["load_inline", *_as_list(kw.get("extra_cuda_cflags"))],
            )
        )
        return result

    def load(name: str, sources: Any, *args: Any, **kw: Any):
        start = time.perf_counter()
        files = [Path(s) for s in _as_list(sources)]
        for f in files:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                watch.sources.append(f.read_text(encoding="utf-8"))
        if watch.compile_only:
            info = BuildInfo(kind="load", name=name, compile_only=True)
            for f in files:
                if f.suffix != ".cu":
                    continue
                ok, log, secs, cached = _nvcc_compile_only(
                    f.read_text(),
                    f.name,
                    extra=[],
                    include_paths=_as_list(kw.get("extra_include_paths")),
                )
                info.seconds += secs
                info.cached = cached
                if not ok:
                    msgs = parse_compiler_output(log, f.name)
                    findings: list[Finding] = [
                        Finding(
                            path=str(f),
                            line=m.line or 1,
                            column=m.column or 1,
                            severity=Severity.error,
                            code="nvcc",
                            message=m.message,
                            source="stitch-verify",
                        )
                        for m in msgs
                        if m.severity == "error" and m.file is None
                    ] or [_doc_error(watch.document, f"nvcc failed on {f}: {tail(log, 300)}")]
                    info.log_tail = tail(log)
                    raise BuildFailure(f"load({name!r}) failed to build", findings, info)
            watch.builds.append(info)
            return _CompileOnlyExtension(name)
        if any(f.suffix == ".cu" for f in files):
            kw = with_lineinfo(kw)
        try:
            result = real_load(name, sources, *args, **kw)
        except Exception as exc:
            log = str(exc)
            findings = []
            for f in files:
                for m in parse_compiler_output(log, f.name):
                    if m.file is None and m.severity == "error":
                        findings.append(
                            Finding(
                                path=str(f),
                                line=m.line or 1,
                                column=m.column or 1,
                                severity=Severity.error,
                                code="nvcc",
                                message=m.message,
                                source="stitch-verify",
                            )
                        )
            findings = findings or [_doc_error(watch.document, f"load({name!r}) failed")]
            info = BuildInfo(
                kind="load", name=name, seconds=time.perf_counter() - start, log_tail=tail(log)
            )
            raise BuildFailure(f"load({name!r}) failed to build", findings, info) from exc
        watch.builds.append(BuildInfo(kind="load", name=name, seconds=time.perf_counter() - start))
        return result

    cpp_ext.load_inline = load_inline
    cpp_ext.load = load
    try:
        yield
    finally:
        cpp_ext.load_inline = real_inline
        cpp_ext.load = real_load


def with_lineinfo(kw: dict[str, Any]) -> dict[str, Any]:
    """Add `-lineinfo` to a torch build's CUDA flags: the profiler needs it to map its
    findings to source lines, and it does not change the generated code."""
    flags = _as_list(kw.get("extra_cuda_cflags"))
    if "-lineinfo" in flags:
        return kw
    return {**kw, "extra_cuda_cflags": [*flags, "-lineinfo"]}


def torch_arch_list(arch: str) -> str:
    """sm_90a -> '9.0a' (TORCH_CUDA_ARCH_LIST's spelling), so torch builds use the same target
    as our own builds instead of torch's default (sm_90 plus PTX on an H100/H200)."""
    num = fastcuda.normalize_arch(arch).removeprefix("sm_")
    suffix = num[-1] if num[-1].isalpha() else ""
    digits = num.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def _doc_error(document: Path, message: str) -> Finding:
    return Finding(
        path=str(document),
        line=1,
        severity=Severity.error,
        code="nvcc",
        message=message,
        source="stitch-verify",
    )


def _load_inline_compile_only(
    name: str, cpp_text: str, cuda_text: str, kw: dict[str, Any], watch: BuildWatch
) -> types.ModuleType:
    info = BuildInfo(kind="load_inline", name=name, compile_only=True, cached=True)
    includes = _as_list(kw.get("extra_include_paths"))
    extra = [
        f for f in _as_list(kw.get("extra_cuda_cflags")) if f.startswith(("-D", "-I", "--expt"))
    ]
    # The CUDA file holds the kernels: compile it first (that is where errors usually are).
    for text, filename, flags in ((cuda_text, "cuda.cu", extra), (cpp_text, "main.cpp", [])):
        if not text.strip() or (filename == "main.cpp" and cuda_text and not _has_code(text)):
            continue
        ok, log, secs, cached = _nvcc_compile_only(
            text, filename, extra=flags, include_paths=includes
        )
        info.seconds += secs
        info.cached = info.cached and cached
        info.log_tail = tail(log)
        if not ok:
            msgs = [m for m in parse_compiler_output(log, filename) if m.file is None]
            findings = findings_from_messages(
                msgs, watch.document, text, fallback=f"nvcc -c {filename} failed: {tail(log, 300)}"
            )
            raise BuildFailure(f"load_inline({name!r}) failed to compile", findings, info)
    watch.builds.append(info)
    return _CompileOnlyExtension(name)


def _has_code(cpp_text: str) -> bool:
    """main.cpp of load_inline is usually only declarations; skip compiling it then (it costs
    a full pass over torch/extension.h and finds nothing the CUDA pass would not)."""
    body = [
        line
        for line in cpp_text.splitlines()
        if line.strip() and not line.strip().startswith(("#", "//"))
    ]
    return any("{" in line for line in body)


# --------------------------------------------------------------------------- fastcuda, statically


def static_inline_builds(
    module: types.ModuleType, document: Path, watch: BuildWatch, skipped: list[Finding]
) -> list[str]:
    """Compile-only: `load_inline` calls the import did not reach (inside `__init__` or
    `forward`) are made now, with their arguments read as literals (see `literals`). A call
    whose arguments need code to run is skipped and noted in `skipped`. Must run inside
    `watch_torch_builds`, so the calls compile only."""
    try:
        import torch.utils.cpp_extension as cpp_ext
    except ImportError:
        return []
    done = {b.name for b in watch.builds}
    made: list[str] = []
    for args, kwargs in _calls(document, vars(module), {"load_inline"}, skipped):
        name = kwargs.get("name", args[0] if args else None)
        if not isinstance(name, str) or name in done:
            continue
        cpp_ext.load_inline(*args, **kwargs)
        done.add(name)
        made.append(name)
    return made


def _calls(
    document: Path, namespace: dict[str, Any], names: set[str], skipped: list[Finding]
) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """Arguments of every call to one of `names` in the file, read as literals or as names bound
    to literal values in `namespace`. Nothing is evaluated: a call whose arguments need code to
    run (a function call, an attribute, a local variable) is skipped and noted in `skipped`."""
    try:
        tree = ast.parse(document.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if fname not in names:
            continue
        try:
            args = [literal_value(a, namespace) for a in node.args]
            kwargs = {k.arg: literal_value(k.value, namespace) for k in node.keywords if k.arg}
            if any(k.arg is None for k in node.keywords):
                raise NotLiteral(node, "**keyword unpacking")
        except NotLiteral as exc:
            skipped.append(
                Finding(
                    path=str(document),
                    line=node.lineno,
                    severity=Severity.information,
                    code="stitch.static-build-skipped",
                    message=(
                        f"{fname}(...) was not built statically: its arguments are not literals "
                        f"or names bound to literals ({exc}); nothing of it was run"
                    ),
                    source="stitch-verify",
                )
            )
            continue
        yield args, kwargs


def static_fastcuda_builds(
    namespace: dict[str, Any], document: Path, skipped: list[Finding]
) -> list[str]:
    """Build, with no GPU, what a candidate would build lazily on its first forward.

    Generated code calls `load_cuda(...)` inside `forward`. Without a GPU nothing runs, so we
    read the arguments of each `load_cuda`/`build_cuda` call the file makes as literals (names
    resolve in `namespace`); if none can be read, every module-level string holding
    `extern "C"` is built with default flags. Returns the names built; raises CudaBuildError on
    a failure.
    """
    built: list[str] = []
    for args, kwargs in _calls(document, namespace, {"load_cuda", "build_cuda"}, skipped):
        if not args or not isinstance(args[0], str):
            continue
        fastcuda.build_cuda(
            args[0],
            name=str(kwargs.get("name", "candidate")),
            extra_flags=kwargs.get("extra_flags", ()),
            libraries=kwargs.get("libraries", ("cublas", "cublasLt")),
            arch=kwargs.get("arch"),
        )
        built.append(str(kwargs.get("name", "candidate")))
    if built:
        return built
    for key, value in namespace.items():
        if isinstance(value, str) and 'extern "C"' in value and "__global__" in value:
            name = "".join(c if c.isalnum() else "_" for c in key).strip("_").lower() or "cuda"
            fastcuda.build_cuda(value, name=name if name[0].isalpha() else f"k_{name}")
            built.append(name)
    return built
