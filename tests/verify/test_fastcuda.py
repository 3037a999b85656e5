"""The nvcc-only build path: builds with no GPU, caches by content, maps errors to source lines."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stitch_lsp.runtime import CudaBuildError, CudaLaunchError, build_cuda, load_cuda
from stitch_lsp.runtime.fastcuda import check_launch, normalize_arch, parse_compiler_output

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH"),
]

KERNEL = r"""
#include <cuda_runtime.h>
__global__ void scale_kernel(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
extern "C" int launch_scale(const float* x, float* y, float a, long long n, cudaStream_t s) {
  scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(x, y, a, n);
  return (int)cudaGetLastError();
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("STITCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("STITCH_CUDA_ARCH", "sm_90a")
    return cache


def test_cold_then_warm_build(_private_cache: Path) -> None:
    cold = build_cuda(KERNEL, name="scale")
    assert not cold.cached
    assert cold.path.is_file() and cold.path.is_relative_to(_private_cache)
    assert "-lineinfo" in cold.command
    assert "-gencode=arch=compute_90a,code=sm_90a" in cold.command
    warm = build_cuda(KERNEL, name="scale")
    assert warm.cached and warm.path == cold.path
    assert warm.seconds < 0.5
    assert warm.command == cold.command
    # A different flag is a different cache entry.
    other = build_cuda(KERNEL, name="scale", extra_flags=["-DUNUSED=1"])
    assert not other.cached and other.path != cold.path
    # No stray temp folders are left behind.
    leftovers = [p for p in _private_cache.rglob(".scale-*")]
    assert leftovers == []


def test_load_exports_launcher_and_error_strings() -> None:
    lib = load_cuda(KERNEL, name="scale_load")
    assert isinstance(lib, ctypes.CDLL)
    assert lib.launch_scale is not None
    with pytest.raises(CudaLaunchError, match="illegal memory access") as info:
        check_launch(700, lib, "launch_scale")
    assert info.value.code == 700
    check_launch(0, lib)  # no error, no exception


def test_compile_error_is_located_in_the_source_string() -> None:
    broken = KERNEL.replace("a * x[i]", "a * undefined_thing(x[i])")
    with pytest.raises(CudaBuildError) as info:
        build_cuda(broken, name="broken")
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert errors, info.value.log
    line = broken.splitlines().index("  if (i < n) y[i] = a * undefined_thing(x[i]);") + 1
    assert errors[0].line == line and errors[0].file is None
    assert errors[0].column == len("  if (i < n) y[i] = a * ") + 1
    assert "undefined_thing" in errors[0].message
    assert "undefined_thing" in str(info.value)


def test_missing_header_is_an_error_on_its_line() -> None:
    with pytest.raises(CudaBuildError) as info:
        build_cuda('// first\n#include "no_such_header.cuh"\n', name="nohdr")
    (err,) = [d for d in info.value.diagnostics if d.severity == "error"]
    assert err.line == 2 and "no_such_header" in err.message


def test_concurrent_processes_share_one_entry(tmp_path: Path) -> None:
    script = (
        "from stitch_lsp.runtime import build_cuda\n"
        "import sys\n"
        f"r = build_cuda({KERNEL!r} + '// concurrent\\n', name='conc')\n"
        "print(r.path)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and Path(outs[0]).is_file()
    ctypes.CDLL(outs[0])  # whole, loadable library


def test_bad_name_is_rejected() -> None:
    with pytest.raises(ValueError):
        build_cuda(KERNEL, name="not a name")


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("9.0", "sm_90a"),
        ("90", "sm_90a"),
        ("sm_90a", "sm_90a"),
        ("8.0", "sm_80"),
        ("sm_100a", "sm_100a"),
    ],
)
def test_normalize_arch(raw: str, want: str) -> None:
    assert normalize_arch(raw) == want


def test_parse_messages_from_all_tools() -> None:
    log = "\n".join(
        [
            'k.cu(12): error: identifier "foo" is undefined',
            "    foo();",
            "    ^",
            "/usr/include/x.h(3): warning #177-D: variable declared but never referenced",
            "k.cu:7:3: error: expected ';' before '}' token",
            "ptxas error   : Entry function 'k' uses too much shared data (0x20000 bytes)",
            "/usr/bin/ld: cannot find -lfoo: No such file or directory",
            "collect2: error: ld returned 1 exit status",
        ]
    )
    msgs = parse_compiler_output(log, "/some/dir/k.cu", line_offset=3)
    assert [(m.line, m.column, m.severity, m.file) for m in msgs] == [
        (9, 3, "error", None),
        (3, None, "warning", "/usr/include/x.h"),
        (4, 3, "error", None),
        (None, None, "error", None),
        (None, None, "error", None),
    ]
    assert "too much shared data" in msgs[3].message
    assert "cannot find -lfoo" in msgs[4].message
