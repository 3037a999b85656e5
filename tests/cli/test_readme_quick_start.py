"""The README's Quick start installs what its own examples need, and `.ci/run` agrees with it
(issue 27): the `cuda` extra pins the cuBLAS headers wheel that the generated GEMMs build with."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
EXTRAS: dict[str, list[str]] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]


def quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [ln for ln in block.group(1).splitlines() if ln and not ln.startswith("#")]


def installed_extras(command: str) -> set[str]:
    """The extras a `pip install -e '.[a,b]'` in `command` asks for."""
    found = re.search(r"pip install (?:-q )?-e '\.\[([^\]]*)\]'", command)
    assert found is not None, command
    return set(found.group(1).split(","))


def cublas_pin() -> tuple[str, str]:
    """(package, version) of the `cuda` extra's one requirement."""
    (requirement,) = EXTRAS["cuda"]
    found = re.fullmatch(r"([\w-]+)==([\d.]+)(;.*)?", requirement)
    assert found is not None, f"the cuda extra is not pinned: {requirement}"
    return found.group(1), found.group(2)


def test_command_1_installs_the_cuda_extra_for_the_generated_gemms() -> None:
    first = quick_start()[0]
    assert installed_extras(first) == {"torch", "cuda"}
    assert "stitch-lsp generate examples/layernorm_gelu.py" in first
    assert (REPO / "examples" / "layernorm_gelu.py").is_file()
    # the default is auto: the command needs no flag to work without a GPU
    assert "--verify" not in first


def test_the_cuda_extra_pins_the_wheel_the_build_looks_for() -> None:
    from stitch_lsp.runtime import fastcuda

    package, version = cublas_pin()
    major = version.split(".")[0]
    # the package the build names when cuBLAS's headers are missing, for this major release
    assert fastcuda.cublas_package(f"Cuda compilation tools, release {major}.0") == package
    try:
        here = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed here")
    assert here == version, f"this venv has {package} {here}; the cuda extra pins {version}"


def test_the_pinned_wheel_fits_the_local_nvcc() -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"release (\d+)\.", text)
    assert found is not None, text
    if found.group(1) != cublas_pin()[1].split(".")[0]:
        pytest.skip(f"nvcc is CUDA {found.group(1)}: the pin is for another major release")
    from stitch_lsp.runtime import fastcuda

    root = fastcuda.toolkit_root(nvcc)
    assert fastcuda.cublas_include_dirs(root), "neither the toolkit nor the wheel has cuBLAS"


def test_ci_runs_command_2_verbatim_and_gets_cublas_from_the_dev_extra() -> None:
    second = quick_start()[1]
    quiet = [ln.replace("pip install -q ", "pip install ") for ln in CI.splitlines()]
    assert second in quiet  # verbatim but for pip's -q
    assert "dev" in installed_extras(second)
    (own,) = [r for r in EXTRAS["dev"] if r.startswith("stitch-lsp[")]
    assert "cuda" in own[len("stitch-lsp[") : -1].split(",")
    assert not re.search(r"pip install[^\n]* nvidia-cublas", CI)  # nothing beside the pin


def test_the_examples_readme_needs_nothing_the_quick_start_skips() -> None:
    examples = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    assert "pip install -e '.[cuda]'" in examples  # the one extra it names is installed above
