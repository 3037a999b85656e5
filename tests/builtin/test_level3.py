"""CPU: the level-3 dev problems and the whole-model op families generate candidates whose CUDA
compiles with nvcc for sm_90a (no GPU needed), and level-3 coverage does not fall back."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .helpers import generate_for, write_problem
from .problems_l3 import EINOPS, L3
from .test_generate_compile import _has_cublas

pytest.importorskip("torch")

# Every dev problem: recurrent modules are captured whole (catalog.LEAF_MODULES).
LEVEL3_HANDLED = 22


def _cuda(path: Path) -> str:
    """The candidate's CUDA; without cuBLAS headers (a CPU-only toolkit) the GEMM launchers are
    left out, and the generated kernels are what is checked."""
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.partition import fold_gemm_epilogues, partition
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(path)
    groups = fold_gemm_epilogues(graph, partition(graph))
    return Codegen(graph, groups).cuda_source(with_gemm=_has_cublas())


def _compile_all(sources: dict[str, str]) -> None:
    from stitch_lsp.runtime import build_cuda

    def build(name: str) -> None:
        build_cuda(sources[name], name=f"l3_test_{name}", libraries=("cublas",), arch="sm_90a")

    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(build, sorted(sources)))


def test_level3_coverage_and_compile(kernelbench_dir: Path) -> None:
    from stitch_lsp.compiler.worker.generate import generate

    files = sorted((kernelbench_dir / "level3").glob("*.py"))
    handled: dict[str, str] = {}
    refused: dict[str, str] = {}
    for f in files:
        cand = generate(f, f.name)
        if cand.handled and cand.cuda_source:
            handled[f.stem] = cand.cuda_source if _has_cublas() else _cuda(f)
        else:
            refused[f.stem] = cand.reason
            assert "(line " in cand.reason, cand.reason  # a refusal names the op and the line
    assert len(handled) >= LEVEL3_HANDLED, refused
    if shutil.which("nvcc"):
        _compile_all(handled)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_op_families_compile(tmp_path: Path) -> None:
    sources: dict[str, str] = {}
    problems = dict(L3)
    try:
        import einops  # noqa: F401

        problems |= EINOPS
    except ImportError:
        pass
    for name, source in problems.items():
        path = write_problem(tmp_path, name, source)
        cand = generate_for(path)
        assert cand.handled and cand.cuda_source, (name, cand.reason)
        sources[name] = cand.cuda_source if _has_cublas() else _cuda(path)
    _compile_all(sources)


def test_reductions_over_two_slices_of_one_tensor_keep_two_accumulators(tmp_path: Path) -> None:
    """`rows[1].sum() * rows[0].mean()` reads the same tensor at two offsets: fused into one
    reduction kernel, each needs its own accumulator (sharing one computed rows[1] twice)."""
    cand = generate_for(write_problem(tmp_path, "split_sizes_unbind", L3["split_sizes_unbind"]))
    assert cand.handled, cand.reason
    source = cand.source or ""
    start = source.index("__global__", source.index("fuses: .sum()"))
    kernel = source[start : source.index('extern "C"', start)]
    assert "s1.push(" in kernel
    # a block per row, or (short rows) a few lanes per row: each slot combined on its own
    assert "block_allreduce<SumS>(s1" in kernel or "lanes_allreduce<SumS, LANES>(s1" in kernel
    assert "__ldg(in0 + 7 + f)" in kernel and "__ldg(in0 + f)" in kernel
