"""End-to-end Verifier runs on a real GPU: honest, wrong, faulting, hanging and cheating kernels.

The worker processes of one module run concurrently (they are independent CUDA contexts), so
the whole file costs about as long as its slowest case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.verify.client import run_worker

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]


def _request(ref: str, cand: str, **kw: Any) -> VerifyRequest:
    base = {"trials": 3, "timing_trials": 10, "compare_compile": False, "device": "cuda:0"}
    base.update(kw)
    return VerifyRequest(reference=str(DATA / ref), candidate=str(DATA / cand), **base)


# name: (reference, candidate, request overrides, timeout)
CASES: dict[str, tuple[str, str, dict[str, Any], float]] = {
    "good": ("ref_bias_relu.py", "cand_good.py", {"compare_compile": True, "trials": 5}, 300),
    "pair": ("pair_good.py", "pair_good.py", {}, 200),
    "wrong": ("ref_bias_relu.py", "cand_wrong.py", {}, 200),
    "fault": ("ref_bias_relu.py", "cand_fault.py", {}, 200),
    "hang": ("ref_bias_relu.py", "cand_hang.py", {}, 45),
    "inplace": ("ref_bias_relu.py", "cand_inplace.py", {}, 200),
    "cache": ("ref_bias_relu.py", "cand_cache.py", {}, 200),
    "downcast": ("ref_small_bias_relu.py", "cand_downcast.py", {}, 200),
    "zero": ("ref_tiny_bias_relu.py", "cand_zero.py", {}, 200),
    "side_stream": ("ref_bias_relu.py", "cand_side_stream.py", {}, 200),
    "inline_lazy_error": ("ref_bias_relu.py", "cand_inline_lazy_error.py", {}, 300),
    "load_error": ("ref_bias_relu.py", "cand_load_error.py", {}, 300),
    "oom": ("ref_bias_relu.py", "cand_oom.py", {}, 200),
    "inline_good": ("ref_bias_relu.py", "cand_inline.py", {}, 300),
    "inline_error": ("ref_bias_relu.py", "cand_inline_error.py", {}, 300),
}


def _run_case(name: str) -> VerifyResult:
    ref, cand, kw, timeout = CASES[name]
    return run_worker(
        _request(ref, cand, **kw),
        python=sys.executable,
        env=dict(os.environ),
        timeout_s=timeout,
        cwd=DATA,
    )


def _run_cli() -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stitch_lsp",
            "verify",
            str(DATA / "ref_bias_relu.py"),
            str(DATA / "cand_good.py"),
            "--json",
            "--trials",
            "2",
            "--no-compile",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    dump = os.environ.get("AREA_OUT")
    out: dict[str, Any] = {}
    # The slow load_inline builds start first; the rest share the other workers.
    order = sorted(CASES, key=lambda n: not n.startswith("inline"))
    with ThreadPoolExecutor(max_workers=7) as ex:
        futures = {ex.submit(_run_case, name): name for name in order}
        futures[ex.submit(_run_cli)] = "cli"
        for fut in as_completed(futures):
            name = futures[fut]
            out[name] = fut.result()
            if dump and isinstance(out[name], VerifyResult):
                Path(dump, f"case_{name}.json").write_text(out[name].model_dump_json(indent=2))
    return out


def _codes(res: VerifyResult) -> set[str]:
    return {e.code for e in res.exploits}


def test_honest_kernel_passes_with_timings(results: dict[str, Any]) -> None:
    res: VerifyResult = results["good"]
    assert res.status is VerifyStatus.passed, (res.message, res.exploits, res.log_tail)
    assert res.correctness and res.correctness.passed and len(res.correctness.trials) == 5
    assert res.correctness.atol == 1e-4 and not res.correctness.tf32
    t = res.timing
    assert t and t.eager and t.candidate and t.eager.n == 10 and t.candidate.median > 0
    assert t.compiled is not None, t.compile_note
    assert res.speedup_vs_eager and res.speedup_vs_compile
    assert t.floor_ms and t.candidate.median >= 0.9 * t.floor_ms
    assert res.build and res.build.kind == "fastcuda" and "-lineinfo" in res.build.command
    assert res.exploits == []


def test_same_file_pair_passes(results: dict[str, Any]) -> None:
    res: VerifyResult = results["pair"]
    assert res.status is VerifyStatus.passed, (res.message, res.log_tail)


def test_cli_json_contract_and_exit_code(results: dict[str, Any]) -> None:
    code, data = results["cli"]
    assert data["status"] == "passed", data.get("message")
    assert code == 0
    assert data["timing"]["candidate"]["median"] > 0
    assert data["speedup_vs_eager"] > 0
    assert isinstance(data["diagnostics"], list)


def test_wrong_kernel_is_located(results: dict[str, Any]) -> None:
    res: VerifyResult = results["wrong"]
    assert res.status is VerifyStatus.incorrect
    bad = next(t for t in res.correctness.trials if not t.passed)
    assert bad.first_mismatch == [0, 4095]
    assert bad.unwritten == 8192  # the skipped column still holds the NaN poison
    assert bad.mismatches == 8192
    assert any(d.code == "stitch.incorrect" for d in res.diagnostics)
    # A miss carries both distances from float64 (here the candidate's is NaN: unwritten).
    assert bad.reference_error_fp64 is not None and bad.reference_error_fp64 < 1e-5
    assert "the fp32 reference itself is" in bad.message


def test_illegal_address_is_contained(results: dict[str, Any]) -> None:
    res: VerifyResult = results["fault"]
    assert res.status is VerifyStatus.runtime_error
    text = (res.message + res.log_tail).lower()
    assert "illegal" in text or "invalid" in text, res.message


def test_out_of_memory_is_contained(results: dict[str, Any]) -> None:
    res: VerifyResult = results["oom"]
    assert res.status is VerifyStatus.runtime_error
    assert "out of memory" in res.message.lower(), res.message


def test_hang_times_out(results: dict[str, Any]) -> None:
    res: VerifyResult = results["hang"]
    assert res.status is VerifyStatus.timeout
    assert res.phase in {"correctness", "build"}


def test_input_mutation_and_alias_are_exploits(results: dict[str, Any]) -> None:
    res: VerifyResult = results["inplace"]
    assert res.status is VerifyStatus.exploit, res.message
    assert {"stitch.exploit.input-mutation", "stitch.exploit.alias-input"} <= _codes(res)


def test_pointer_cache_is_caught(results: dict[str, Any]) -> None:
    res: VerifyResult = results["cache"]
    assert res.status in {VerifyStatus.incorrect, VerifyStatus.exploit}, res.message
    if res.status is VerifyStatus.exploit:
        assert "stitch.exploit.cached-output" in _codes(res)


def test_fp16_downcast_is_caught(results: dict[str, Any]) -> None:
    res: VerifyResult = results["downcast"]
    assert res.correctness and res.correctness.passed  # it passes the tolerance...
    assert res.status is VerifyStatus.exploit  # ...but not the float64 comparison
    assert "stitch.exploit.precision" in _codes(res)
    down = [t for t in res.correctness.precision.trials if t.downgrade]
    assert down and all(t.inputs != "get_inputs" for t in down)


def test_constant_output_is_caught(results: dict[str, Any]) -> None:
    res: VerifyResult = results["zero"]
    assert res.status is VerifyStatus.exploit
    assert "stitch.exploit.constant-output" in _codes(res)


def test_side_stream_is_caught(results: dict[str, Any]) -> None:
    res: VerifyResult = results["side_stream"]
    assert res.status in {VerifyStatus.incorrect, VerifyStatus.exploit}, res.message
    if res.status is VerifyStatus.exploit:
        assert "stitch.exploit.side-stream" in _codes(res)


def test_load_inline_candidate_passes(results: dict[str, Any]) -> None:
    res: VerifyResult = results["inline_good"]
    assert res.status is VerifyStatus.passed, (res.message, res.log_tail[-2000:])
    assert res.build and res.build.kind == "load_inline" and res.build.seconds > 0
    from stitch_lsp.runtime import detect_arch
    from stitch_lsp.verify.worker.loading import torch_arch_list

    assert "-lineinfo" in res.build.command
    assert res.build.arch == torch_arch_list(detect_arch())  # e.g. 9.0a on an H100/H200


def test_load_inline_error_maps_into_the_python_document(results: dict[str, Any]) -> None:
    res: VerifyResult = results["inline_error"]
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-2000:])
    errs = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    assert errs, res.diagnostics
    lines = (DATA / "cand_inline_error.py").read_text().splitlines()
    assert "missing_offset" in lines[errs[0].line - 1], errs[0]
    assert "missing_offset" in errs[0].message


def test_load_inline_error_in_init_is_a_compile_error(results: dict[str, Any]) -> None:
    res: VerifyResult = results["inline_lazy_error"]
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-2000:])
    errs = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    lines = (DATA / "cand_inline_lazy_error.py").read_text().splitlines()
    assert errs and "missing_offset" in lines[errs[0].line - 1], errs


def test_load_error_points_into_the_cu_file(results: dict[str, Any]) -> None:
    res: VerifyResult = results["load_error"]
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-2000:])
    errs = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    assert errs and errs[0].path.endswith("kernel_error.cu") and errs[0].line == 4, errs


# ----------------------------------------------------------------------------- in-process checks


def test_host_clock_stream_check_in_process() -> None:
    """The fallback used when no device activity can be recorded."""
    import torch

    from stitch_lsp.verify.worker.exploits import check_stream

    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def honest(x: torch.Tensor) -> torch.Tensor:
        return x @ x

    def sneaky(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        with torch.cuda.stream(side):
            torch.matmul(x, x, out=out)
        return out

    assert check_stream(honest, [a]) == []
    found = check_stream(sneaky, [a])
    assert [f.code for f in found] == ["stitch.exploit.side-stream"]


def test_output_reuse_and_pointer_cache_in_process() -> None:
    import torch

    from stitch_lsp.verify.worker.exploits import check_reuse_and_caching

    ref = torch.nn.ReLU()
    buf: dict[str, torch.Tensor] = {}
    cache: dict[int, torch.Tensor] = {}

    def reuses(x: torch.Tensor) -> torch.Tensor:
        out = buf.setdefault("out", torch.empty_like(x))
        out.copy_(torch.relu(x))
        return out

    def caches(x: torch.Tensor) -> torch.Tensor:
        return cache.setdefault(x.data_ptr(), torch.relu(x))

    a = [torch.randn(1024, device="cuda")]
    b = [torch.randn(1024, device="cuda")]
    assert check_reuse_and_caching(ref, ref, a, b, 1e-4, 1e-4) == []
    assert [f.code for f in check_reuse_and_caching(ref, reuses, a, b, 1e-4, 1e-4)] == [
        "stitch.exploit.output-reuse"
    ]
    codes = [f.code for f in check_reuse_and_caching(ref, caches, a, b, 1e-4, 1e-4)]
    assert codes == ["stitch.exploit.cached-output"]


def test_poison_marks_unwritten_memory() -> None:
    import torch

    from stitch_lsp.verify.worker.correctness import poison_allocator

    n = 1 << 20
    poison_allocator(torch.device("cuda"), [n * 4])
    fresh = torch.empty(n, device="cuda")
    assert bool(torch.isnan(fresh).all())


def test_roofline_floor_of_eager_relu_is_not_beaten() -> None:
    import torch

    from stitch_lsp.verify.worker.exploits import peak_flops, roofline_floor_ms
    from stitch_lsp.verify.worker.timing import L2Flusher, copy_bandwidth, stats, time_cuda

    dev = torch.device("cuda")
    x = torch.randn(8192, 8192, device=dev)
    bw = copy_bandwidth(dev)
    assert 0.5e12 < bw < 10e12
    floor = roofline_floor_ms(2 * x.numel() * 4, 0, bw * 1.05, peak_flops(x.dtype, False, dev))
    eager = stats(time_cuda(torch.relu, [[x]], trials=10, warmup=2, flush=L2Flusher(dev)))
    assert eager.median >= 0.9 * floor
