"""cuBLAS from the `nvidia-cublas` pip wheel, for nvcc-only toolkits (issue 17, item 19).

A pip or conda nvcc has no cuBLAS headers; the wheel ships them (and versioned libraries only,
`libcublas.so.13`). The build finds both in the Python's import path, and when they are found
nowhere, the error names the package to install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stitch_lsp.runtime import CudaBuildError, build_cuda, fastcuda

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH"),
]

SOURCE = r"""
#include <cublas_v2.h>
extern "C" int launch_probe(void) { return stitch_probe_cublas(); }
"""


@pytest.fixture(autouse=True)
def _toolkit_without_cublas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STITCH_CUDA_ARCH", "sm_90a")
    nvcc = fastcuda.find_nvcc()
    root = fastcuda.toolkit_root(nvcc) if nvcc else None
    if fastcuda.toolkit_has_cublas(root):
        pytest.skip("this toolkit has its own cuBLAS headers")
    # Hide NVIDIA wheels already installed here (only their folders: taking whole
    # site-packages off sys.path would break every later import of the session).
    installed = {Path(p).resolve() for p in sys.path if p and (Path(p) / "nvidia").is_dir()}
    real = fastcuda.cublas_wheels
    monkeypatch.setattr(
        fastcuda,
        "cublas_wheels",
        lambda: [w for w in real() if w.resolve().parent.parent not in installed],
    )


def _fake_wheel(site: Path) -> Path:
    """A site-packages folder holding nvidia/cublas with a header and a versioned library."""
    wheel = site / "nvidia" / "cublas"
    (wheel / "include").mkdir(parents=True)
    (wheel / "lib").mkdir()
    (wheel / "include" / "cublas_v2.h").write_text('extern "C" int stitch_probe_cublas(void);\n')
    stub = wheel / "lib" / "stub.c"
    stub.write_text("int stitch_probe_cublas(void) { return 7; }\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the stub library")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(wheel / "lib" / "libcublas.so.13"), str(stub)],
        check=True,
    )
    return wheel


def test_headers_and_libraries_come_from_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = _fake_wheel(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = build_cuda(SOURCE, name="probe", libraries=("cublas",))
    assert f"-I{wheel / 'include'}" in result.command
    assert "-l:libcublas.so.13" in result.command
    import ctypes

    assert ctypes.CDLL(str(result.path)).launch_probe() == 7


def test_found_nowhere_names_the_package() -> None:
    with pytest.raises(CudaBuildError) as err:
        build_cuda(SOURCE, name="probe_missing", libraries=("cublas",))
    assert "pip install nvidia-cublas" in str(err.value)
    first = next(d for d in err.value.diagnostics if d.severity == "error")
    assert "pip install nvidia-cublas" in first.message and first.line == 2


def test_package_name_follows_the_toolkit() -> None:
    assert fastcuda.cublas_package("Cuda compilation tools, release 13.0, V13.0.88") == (
        "nvidia-cublas"
    )
    assert fastcuda.cublas_package("release 12.4, V12.4.131") == "nvidia-cublas-cu12"
