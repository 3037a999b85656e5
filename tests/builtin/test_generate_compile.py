"""CPU: capture and generate for every op family, compile the kernels with nvcc (no GPU), and
check the candidates against the static checks and the KernelBench level 2 coverage."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .helpers import generate_for, serious_findings, write_problem
from .problems import PROBLEMS, UNSUPPORTED

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

pytest.importorskip("torch")

# One problem per kernel shape: pointwise (scalar and float4), row (scalar and float4), tile,
# channel with running-stat updates, GEMM operands, two reductions in a row.
COMPILE_SET = [
    "elementwise_chain",
    "linear_odd_tail",
    "softmax_rows",
    "log_softmax_rows_vec",
    "min_middle_then_softmax",
    "batch_norm_1d_train",
    "batch_norm_2d_train",
    "group_norm_conv",
    "global_avg_pool",
    "bmm",
    "split_batch_norm_2d",
    "split_layer_norm_odd",
    "pools_padded",
    "maxpool3d_dilated",
    "argmax_middle",
    "split_tile_batch_norm_1d",
    "rotate_half_after_linear",
    "cache_index_copy",
    "two_independent_kernels",
]


def _cuda_for(path: Path) -> str:
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.stages import plan_stages
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(path)
    # cuBLAS headers may be missing on a CPU-only toolkit; the fused kernels are what we check.
    return Codegen(graph, plan_stages(graph)).cuda_source(with_gemm=_has_cublas())


def _has_cublas() -> bool:
    """cuBLAS headers in the toolkit, or in the nvidia-cublas wheel the build also searches."""
    from stitch_lsp.runtime import fastcuda

    nvcc = fastcuda.find_nvcc()
    if nvcc is None:
        return False
    return fastcuda.toolkit_has_cublas(fastcuda.toolkit_root(nvcc)) or bool(
        fastcuda.cublas_wheels()
    )


@pytest.fixture(scope="module")
def problem_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("problems")
    for name, source in PROBLEMS.items():
        write_problem(folder, name, source)
    return folder


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_generates_clean_candidate(problem_dir: Path, name: str) -> None:
    cand = generate_for(problem_dir / f"{name}.py")
    assert cand.handled, cand.reason
    assert cand.source is not None and cand.source.startswith(f"# stitch-lsp: reference={name}.py")
    assert "class ModelNew(nn.Module)" in cand.source
    assert cand.groups and all(g.ops for g in cand.groups)
    path = problem_dir / f"{name}_builtin.py"
    path.write_text(cand.source)
    assert not serious_findings(path)
    compile(cand.source, str(path), "exec")


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_says_why_not(tmp_path: Path, name: str) -> None:
    source, word = UNSUPPORTED[name]
    cand = generate_for(write_problem(tmp_path, name, source))
    assert not cand.handled
    assert word.lower() in cand.reason.lower()
    assert cand.source is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_kernels_compile_with_nvcc(problem_dir: Path) -> None:
    from stitch_lsp.runtime import build_cuda

    sources = {n: _cuda_for(problem_dir / f"{n}.py") for n in COMPILE_SET}  # tracing: one thread

    def build(name: str) -> None:
        build_cuda(sources[name], name=f"builtin_test_{name}", libraries=("cublas",), arch="sm_90a")

    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(build, COMPILE_SET))


def test_level2_coverage(kernelbench_dir: Path, tmp_path: Path) -> None:
    """The builtin coder handles every KernelBench level 2 problem in the dev set."""
    from stitch_lsp.compiler.worker.generate import generate

    files = sorted((kernelbench_dir / "level2").glob("*.py"))
    handled = []
    for f in files:
        cand = generate(f, f.name)
        if cand.handled:
            handled.append(f.name)
            # Every tail is fused: into a generated kernel, or into the cuBLASLt epilogue.
            kinds = {g.kind for g in cand.groups}
            lt = any("epilogue" in op for g in cand.groups for op in g.ops)
            assert kinds & {"pointwise", "reduction"} or lt, f.name
    assert len(handled) >= 0.6 * len(files), f"handled {len(handled)}/{len(files)}"


def test_generate_candidate_runs_the_worker(tmp_path: Path) -> None:
    """The torch-free API: a subprocess does the work; the header is relative to the output."""
    from stitch_lsp.compiler import generate_candidate
    from stitch_lsp.config import Settings

    ref = write_problem(tmp_path, "ref", PROBLEMS["linear_relu_vec"])
    out = tmp_path / "out"
    out.mkdir()
    cand = generate_candidate(ref, Settings(), candidate_dir=out)
    assert cand.handled, cand.reason
    assert cand.source is not None and cand.source.startswith("# stitch-lsp: reference=../ref.py")
    assert [g.kind for g in cand.groups] == ["gemm", "pointwise"]
    assert cand.groups[0].library and "cuBLASLt" in cand.groups[0].library


def test_generate_candidate_reports_failures(tmp_path: Path) -> None:
    from stitch_lsp.compiler import generate_candidate
    from stitch_lsp.config import Settings

    missing = generate_candidate(tmp_path / "nope.py", Settings())
    assert not missing.handled and "no such file" in missing.reason
    ref = write_problem(tmp_path, "ref", PROBLEMS["softmax_rows"])
    bad = generate_candidate(ref, Settings(python_for_workers=str(tmp_path / "no-python")))
    assert not bad.handled and "cannot start" in bad.reason
