"""Fast CUDA builds for generated code: nvcc alone, a shared library, loaded with ctypes.

`torch.utils.cpp_extension.load_inline` spends almost all of its build time (45-62 s on an
H200 machine) compiling torch's C++ headers. Code that stitch-lsp generates does not need them:
its kernels are reached through plain C launchers that take raw device pointers, so nvcc can
build them on its own in about a second, and a content-addressed cache makes a repeat build a
file lookup.

Launcher convention (what generated CUDA must follow):

* every entry point is ``extern "C" int name(<args>..., cudaStream_t stream)``;
* tensors arrive as raw device pointers (``float*``, ``const float*``, ...), sizes as
  ``int``/``long long``, scalars as ``float``;
* the launcher enqueues its kernels on ``stream`` (the caller's current stream) and returns
  ``(int)cudaGetLastError()``: 0 on success, a ``cudaError_t`` otherwise.

On the Python side, wrap every argument in its ctypes type (``ctypes.c_void_p(t.data_ptr())``,
``ctypes.c_int(n)``, ``ctypes.c_float(a)``, ``ctypes.c_void_p(torch.cuda.current_stream()
.cuda_stream)``; a bare Python int would be passed as a 32-bit C int) and pass the result to
:func:`check_launch`, which raises :class:`CudaLaunchError` on a non-zero code::

    lib = load_cuda(CUDA_SRC, name="gemm_add_relu")
    check_launch(lib.launch_gemm_add_relu(ctypes.c_void_p(x.data_ptr()), ..., stream), lib)

Nothing here imports torch, and nothing needs a GPU to build: with no GPU the target is sm_90a
(H100/H200) unless ``STITCH_CUDA_ARCH`` says otherwise.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from stitch_lsp.gpus import DEFAULT_ARCH, build_arch, normalize_arch
from stitch_lsp.runtime.nvcc_flags import FlagRefused, checked_flags

DEFAULT_FLAGS: tuple[str, ...] = (
    "-O3",
    "-lineinfo",
    "-std=c++17",
    "-shared",
    "-Xcompiler",
    "-fPIC",
)
BUILD_TIMEOUT_S = 600.0
# Appended (never prepended, so the source's line numbers stay as they are) to every build, so
# the Python side can turn a launcher's return code into CUDA's own message.
_ERROR_STRING_SHIM = """
#include <cuda_runtime.h>
extern "C" const char* stitch_cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}
"""
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CompilerMessage:
    """One compiler or linker message. `line`/`column` are 1-based in the source string's
    coordinates; `file` is None when the message is about the source string itself."""

    line: int | None
    column: int | None
    severity: str  # "error" | "warning" | "remark"
    message: str
    file: str | None = None


@dataclass(frozen=True)
class BuildResult:
    path: Path
    cached: bool
    seconds: float
    command: list[str]
    log: str
    arch: str = DEFAULT_ARCH
    key: str = ""


class CudaBuildError(RuntimeError):
    """nvcc failed (or could not run). `diagnostics` are located in the source string."""

    def __init__(
        self,
        message: str,
        diagnostics: list[CompilerMessage] | None = None,
        log: str = "",
        *,
        source: str | None = None,
        name: str = "",
    ):
        super().__init__(message)
        self.message = message
        self.diagnostics: list[CompilerMessage] = list(diagnostics or [])
        self.log = log
        self.source = source  # the text nvcc compiled, to map its lines back to a document
        self.name = name

    def __str__(self) -> str:
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        if first is None:
            return self.message
        where = f"line {first.line}: " if first.line else ""
        return f"{self.message}: {where}{first.message}"


class CudaLaunchError(RuntimeError):
    """A launcher returned a non-zero cudaError_t."""

    def __init__(self, code: int, text: str, what: str = ""):
        super().__init__(f"{what + ': ' if what else ''}CUDA error {code}: {text}")
        self.code = code


# --------------------------------------------------------------------------- toolchain facts


def find_nvcc() -> str | None:
    """nvcc from `STITCH_NVCC`, `$CUDA_HOME/bin`, or PATH."""
    explicit = os.environ.get("STITCH_NVCC")
    if explicit:
        return explicit
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


@cache
def nvcc_version(nvcc: str) -> str:
    """`nvcc --version` text; part of the cache key, so a toolkit upgrade rebuilds everything."""
    return _toolchain_facts(nvcc)["version"]


@cache
def toolkit_root(nvcc: str) -> Path | None:
    """The CUDA toolkit folder, found through nvcc's dry run (nvcc may be a wrapper script)."""
    top = _toolchain_facts(nvcc)["top"]
    return Path(top) if top else None


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _toolchain_facts(nvcc: str) -> dict[str, str]:
    """nvcc's version and toolkit folder, remembered on disk: asking nvcc costs two process
    starts, which would be most of a warm (cached) build. An entry is trusted only while both
    the nvcc we were given and the toolkit's own nvcc binary are unchanged."""
    given = Path(nvcc).resolve()
    try:
        ident = f"{given}\0{_stat_key(given)}"
    except OSError as exc:
        raise CudaBuildError(f"nvcc not found at {nvcc}: {exc}") from exc
    memo = cache_dir() / "toolchain" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
    try:
        facts = json.loads(memo.read_text())
        if facts.get("top_nvcc") == _stat_key(Path(facts["top"]) / "bin" / "nvcc"):
            return facts
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CudaBuildError(f"cannot run {nvcc} --version: {exc}") from exc
    if out.returncode != 0:
        raise CudaBuildError(f"{nvcc} --version failed", log=out.stdout + out.stderr)
    facts = {"version": out.stdout.strip(), "top": ""}
    try:
        dry = subprocess.run(
            [nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=60,
        )
        m = re.search(r"^#\$ TOP=(.+)$", dry.stdout + dry.stderr, re.MULTILINE)
        if m:
            facts["top"] = str(Path(m.group(1).strip()).resolve())
    except (OSError, subprocess.TimeoutExpired):
        pass
    if not facts["top"]:
        parent = given.parent.parent
        facts["top"] = str(parent) if (parent / "include").is_dir() else ""
    try:
        facts["top_nvcc"] = _stat_key(Path(facts["top"]) / "bin" / "nvcc")
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(facts))
        os.replace(tmp, memo)
    except OSError:
        pass  # no toolkit layout we understand, or a read-only cache: just ask again next time
    return facts


def detect_arch() -> str:
    """The architecture to build for: the one policy of `stitch_lsp.gpus.build_arch`
    (`STITCH_CUDA_ARCH`, else torch's device in this process, else the GPU's, else sm_90a)."""
    return build_arch()


def gencode_flags(arch: str) -> list[str]:
    num = normalize_arch(arch).removeprefix("sm_")
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


def cache_dir() -> Path:
    env = os.environ.get("STITCH_CACHE_DIR")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "stitch-lsp" / "build"
    return base


def _library_dirs(root: Path | None) -> list[Path]:
    dirs: list[Path] = []
    if root is not None:
        dirs += [root / "lib64", root / "lib", *(root / "targets").glob("*/lib")]
    for var in ("LIBRARY_PATH", "LD_LIBRARY_PATH"):
        dirs += [Path(p) for p in os.environ.get(var, "").split(os.pathsep) if p]
    dirs += [Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib/aarch64-linux-gnu")]
    dirs += [Path("/usr/lib64"), Path("/usr/lib")]
    return dirs + [w / "lib" for w in cublas_wheels()]


def _library(name: str, dirs: Sequence[Path]) -> tuple[Path, str] | None:
    """(folder, -l argument) for a library: `libNAME.so`/`.a`, or a versioned `libNAME.so.N`
    alone, as the pip wheels ship it (linked as `-l:libNAME.so.N`)."""
    for d in dirs:
        if (d / f"lib{name}.so").exists() or (d / f"lib{name}.a").exists():
            return d, f"-l{name}"
        versioned = sorted(d.glob(f"lib{name}.so.[0-9]*")) if d.is_dir() else []
        if versioned:
            return d, f"-l:{min(versioned, key=lambda p: len(p.name)).name}"
    return None


CUBLAS_HEADER = "cublas_v2.h"


def cublas_wheels() -> list[Path]:
    """Folders of NVIDIA's pip wheels that hold cuBLAS (`nvidia-cublas`: `nvidia/cublas`, or
    `nvidia/cu13` in newer layouts), in this Python's import path: an nvcc-only toolkit (pip or
    conda) has no cuBLAS of its own."""
    found: list[Path] = []
    for entry in dict.fromkeys(p for p in sys.path if p):
        base = Path(entry) / "nvidia"
        if not base.is_dir():
            continue
        for include in sorted(base.glob(f"*/include/{CUBLAS_HEADER}")):
            folder = include.parent.parent
            if folder not in found:
                found.append(folder)
    return found


def cublas_include_dirs(root: Path | None) -> list[Path]:
    """-I folders for cuBLAS when the toolkit itself lacks its headers; [] when it has them."""
    if toolkit_has_cublas(root):
        return []
    return [w / "include" for w in cublas_wheels()]


def toolkit_has_cublas(root: Path | None) -> bool:
    if root is None:
        return False
    dirs = [root / "include", *(root / "targets").glob("*/include")]
    return any((d / CUBLAS_HEADER).is_file() for d in dirs)


def cublas_package(version_text: str) -> str:
    """The pip package with cuBLAS for this toolkit's major version."""
    m = re.search(r"release (\d+)", version_text)
    major = int(m.group(1)) if m else 13
    return "nvidia-cublas" if major >= 13 else f"nvidia-cublas-cu{major}"


def _missing_cublas_hint(toolchain: str, root: Path | None) -> str:
    where = f"{root}/include" if root is not None else "the CUDA toolkit"
    return (
        f"cuBLAS headers were found neither in {where} nor in an nvidia-cublas wheel: install "
        f"them with `pip install {cublas_package(toolchain)}` (into the Python that builds, "
        f"{sys.executable}) or the toolkit's libcublas-dev package"
    )


# --------------------------------------------------------------------------- messages

_NVCC_MSG = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>error|warning|remark|catastrophic error)"
    r"(?: #[\w-]+)?: (?P<msg>.*)$"
)
_GCC_MSG = re.compile(
    r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? "
    r"(?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
_TOOL_MSG = re.compile(
    r"^(?P<tool>ptxas|nvlink)(?: fatal)?\s*(?P<sev>error|warning|fatal)?\s*: (?P<msg>.*)$"
)
_LD_MSG = re.compile(r"^(?:/\S*/)?(?:ld|collect2)(?:: | error: )(?P<msg>.*)$")


def parse_compiler_output(
    log: str, source_path: str | Path, *, line_offset: int = 0
) -> list[CompilerMessage]:
    """nvcc front end, host compiler, ptxas and linker messages, in source-string coordinates.

    Messages about `source_path` (matched by file name) get `file=None`; `line_offset` is
    subtracted from their lines, for tools that prepend lines to the source (load_inline).
    """
    name = Path(source_path).name
    lines = log.splitlines()
    out: list[CompilerMessage] = []
    for i, raw in enumerate(lines):
        text = raw.rstrip()
        m = _NVCC_MSG.match(text)
        if m:
            column = _caret_column(lines, i)
            sev = "error" if "error" in m.group("sev") else m.group("sev")
            out.append(
                _message(
                    m.group("file"),
                    name,
                    int(m.group("line")),
                    column,
                    sev,
                    m.group("msg"),
                    line_offset,
                )
            )
            continue
        m = _GCC_MSG.match(text)
        if m:
            sev = m.group("sev")
            if sev == "note":
                continue
            sev = "error" if "error" in sev else sev
            col = int(m.group("col")) if m.group("col") else None
            out.append(
                _message(
                    m.group("file"),
                    name,
                    int(m.group("line")),
                    col,
                    sev,
                    m.group("msg"),
                    line_offset,
                )
            )
            continue
        m = _TOOL_MSG.match(text)
        if m:
            sev = "warning" if m.group("sev") == "warning" else "error"
            out.append(CompilerMessage(None, None, sev, f"{m.group('tool')}: {m.group('msg')}"))
            continue
        m = _LD_MSG.match(text)
        if m and "ld returned" not in text:
            out.append(CompilerMessage(None, None, "error", f"linker: {m.group('msg')}"))
    return out


def _message(
    file: str, name: str, line: int, col: int | None, sev: str, msg: str, offset: int
) -> CompilerMessage:
    if Path(file.strip()).name == name:
        return CompilerMessage(max(1, line - offset), col, sev, msg.strip(), None)
    return CompilerMessage(line, col, sev, msg.strip(), file.strip())


def _caret_column(lines: list[str], i: int) -> int | None:
    """nvcc echoes the offending line indented by two spaces, then a caret under the spot."""
    if i + 2 < len(lines):
        caret = lines[i + 2]
        if caret.strip() == "^":
            return max(1, caret.index("^") - 1)
    return None


# --------------------------------------------------------------------------- build


def build_command(
    nvcc: str,
    src: Path,
    out: Path,
    *,
    arch: str,
    extra_flags: Sequence[str],
    libraries: Sequence[str],
    library_dirs: Sequence[Path] = (),
) -> list[str]:
    """The nvcc command line. Libraries are linked only as needed, and their folders are the
    library's RUNPATH, so loading it never depends on LD_LIBRARY_PATH."""
    link: list[str] = []
    if libraries:
        link += ["-Xlinker", "--as-needed"]
        for d in dict.fromkeys(library_dirs):
            link += [f"-L{d}", "-Xlinker", f"-rpath,{d}"]
        link += [lib if lib.startswith("-l") else f"-l{lib}" for lib in libraries]
    return [
        nvcc,
        *DEFAULT_FLAGS,
        *gencode_flags(arch),
        *extra_flags,
        str(src),
        "-o",
        str(out),
        *link,
    ]


def cache_key(
    source: str, *, flags: Sequence[str], arch: str, libraries: Sequence[str], toolchain: str
) -> str:
    h = hashlib.sha256()
    for part in (
        source,
        "\0".join(flags),
        arch,
        "\0".join(libraries),
        toolchain,
        _ERROR_STRING_SHIM,
    ):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def build_cuda(
    source: str,
    *,
    name: str,
    extra_flags: Sequence[str] = (),
    libraries: Sequence[str] = ("cublas", "cublasLt"),
    arch: str | None = None,
    timeout: float = BUILD_TIMEOUT_S,
) -> BuildResult:
    """Build `source` into a shared library, or return the cached one.

    The cache key is sha256(source, flags, arch, libraries, `nvcc --version`). Builds happen in a
    private temp folder inside the cache and are renamed into place, so concurrent builders (other
    threads, processes or verify workers) never see a half-written library. Libraries in
    `libraries` that this toolkit does not have are left out of the link (and said so in the log):
    code that really calls them fails to compile on the missing header instead.
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"name must be a C identifier, got {name!r}")
    try:
        extra_flags = checked_flags(extra_flags)
    except FlagRefused as exc:
        raise CudaBuildError(str(exc)) from None
    nvcc = find_nvcc()
    if nvcc is None:
        raise CudaBuildError(
            "nvcc not found: install the CUDA toolkit or set CUDA_HOME/STITCH_NVCC"
        )
    arch = normalize_arch(arch) if arch else detect_arch()
    toolchain = nvcc_version(nvcc)
    root = toolkit_root(nvcc)
    dirs = _library_dirs(root)
    found = {lib: _library(lib, dirs) for lib in libraries}
    link_args = [f[1] for f in found.values() if f is not None]
    lib_dirs = [f[0] for f in found.values() if f is not None]
    skipped = [lib for lib, f in found.items() if f is None]
    flags = [*(f"-I{d}" for d in cublas_include_dirs(root)), *extra_flags]
    key = cache_key(
        source,
        flags=flags,
        arch=arch,
        libraries=[*link_args, *map(str, lib_dirs)],
        toolchain=toolchain,
    )
    base = cache_dir()
    final = base / key[:2] / f"{name}-{key[:24]}.so"
    log_path = final.with_suffix(".log")
    command_path = final.with_suffix(".cmd")
    start = time.perf_counter()

    with _lock_for(key):
        if final.is_file():
            return _remember(
                BuildResult(
                    final,
                    True,
                    time.perf_counter() - start,
                    _read(command_path).split("\0") if command_path.is_file() else [],
                    _read(log_path),
                    arch,
                    key,
                )
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_work_dirs(final.parent)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
        try:
            src = work / f"{name}.cu"
            src.write_text(
                source + ("\n" if not source.endswith("\n") else "") + _ERROR_STRING_SHIM
            )
            tmp_out = work / f"{name}.so"
            cmd = build_command(
                nvcc,
                src,
                tmp_out,
                arch=arch,
                extra_flags=flags,
                libraries=link_args,
                library_dirs=lib_dirs,
            )
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=timeout, cwd=work, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise CudaBuildError(f"nvcc timed out after {timeout:.0f} s", log=str(exc)) from exc
            except OSError as exc:
                raise CudaBuildError(f"cannot run nvcc: {exc}") from exc
            log = (proc.stdout + proc.stderr).replace(str(work) + "/", "")
            if skipped:
                log = f"note: not linked (not found in this toolkit): {', '.join(skipped)}\n" + log
            if proc.returncode != 0 or not tmp_out.is_file():
                diags = parse_compiler_output(log, src.name)
                message = f"nvcc failed to build {name} (exit {proc.returncode})"
                if re.search(r"cublas(_v2|Lt)?\.h: No such file", log):
                    hint = _missing_cublas_hint(toolchain, root)
                    message = f"{message}: {hint}"
                    diags = [
                        replace(d, message=f"{d.message} ({hint})")
                        if "cublas" in d.message.lower() and "No such file" in d.message
                        else d
                        for d in diags
                    ]
                raise CudaBuildError(
                    message,
                    diags,
                    log,
                    source=source,
                    name=name,
                )
            log_tmp = work / "build.log"
            log_tmp.write_text(log)
            cmd_tmp = work / "build.cmd"
            cmd_tmp.write_text("\0".join(cmd))
            # Log and command first, library last: the library's presence means the entry is whole.
            os.replace(log_tmp, log_path)
            os.replace(cmd_tmp, command_path)
            os.replace(tmp_out, final)
            return _remember(
                BuildResult(final, False, time.perf_counter() - start, cmd, log, arch, key)
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)


STALE_WORK_S = 3600.0


def _remove_stale_work_dirs(folder: Path) -> None:
    """Temp folders of builds whose process was killed (a verify timeout) would pile up."""
    now = time.time()
    for d in folder.glob(".*-*"):
        try:
            if d.is_dir() and now - d.stat().st_mtime > STALE_WORK_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def _remember(result: BuildResult) -> BuildResult:
    _recent.append(result)
    return result


def _lock_for(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


_loaded: dict[Path, ctypes.CDLL] = {}
# Every build of this process, newest last: the Verifier reads it to report build time and cache.
_recent: deque[BuildResult] = deque(maxlen=64)


def recent_builds() -> list[BuildResult]:
    return list(_recent)


def load_cuda(
    source: str,
    *,
    name: str,
    extra_flags: Sequence[str] = (),
    libraries: Sequence[str] = ("cublas", "cublasLt"),
    arch: str | None = None,
) -> ctypes.CDLL:
    """Build (or fetch from the cache) and load the library. Launchers return `int` by default;
    pass their results to :func:`check_launch`."""
    result = build_cuda(source, name=name, extra_flags=extra_flags, libraries=libraries, arch=arch)
    lib = _loaded.get(result.path)
    if lib is None:
        lib = ctypes.CDLL(str(result.path))
        lib.stitch_cuda_error_string.restype = ctypes.c_char_p
        lib.stitch_cuda_error_string.argtypes = [ctypes.c_int]
        _loaded[result.path] = lib
    return lib


def check_launch(code: int, lib: ctypes.CDLL | None = None, what: str = "") -> None:
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
