"""The GPU run's new steps, driven on the CPU (CUDA calls stubbed): attribution from the
candidate's sources and the reference's trace, the check of a kept timed run, the harness
snapshot. What needs a GPU (the activity records, real timing) is in tests/adversarial."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus  # noqa: E402
from stitch_lsp.verify.timeline import Activity, Call  # noqa: E402
from stitch_lsp.verify.worker import harness  # noqa: E402
from stitch_lsp.verify.worker.gpu import GpuRun  # noqa: E402
from stitch_lsp.verify.worker.loading import BuildWatch  # noqa: E402

CANDIDATE = '''
CUDA_SRC = r"""
__global__ void scale_inplace(float* y, float a, long long n) { }
"""
'''


class _Worker:
    def __init__(self, tmp_path: Path) -> None:
        self.req = VerifyRequest(reference="r.py", candidate="c.py", device="cpu", trials=1)
        self.result = VerifyResult(status=VerifyStatus.runtime_error)
        self.candidate_path = tmp_path / "cand.py"
        self.candidate_path.write_text(CANDIDATE)
        self.watch = BuildWatch(self.candidate_path, compile_only=False)
        self.watch.sources.append('extern "C" __global__ void from_build(float* y) {}')
        self.harness = harness.snapshot()


def _matmul_problem() -> types.ModuleType:
    mod = types.ModuleType("ref")

    class Model(torch.nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return torch.matmul(a, b)

    mod.Model = Model  # type: ignore[attr-defined]
    mod.get_inputs = lambda: [torch.rand(8, 8), torch.rand(8, 8)]  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GpuRun:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda *a, **k: None)
    ref = _matmul_problem()
    return GpuRun(_Worker(tmp_path), torch, torch.device("cpu"), ref, ref)  # type: ignore[arg-type]


def _forward(*work: tuple[str, float]) -> Call:
    call = Call(start_ns=0, end_ns=10**9, stream=1)
    t = 1_000
    for name, us in work:
        call.work.append(Activity(name, 1, t, t + int(us * 1000)))
        t += int(us * 1000) + 1000
    return call


def test_attribution_reads_the_sources_and_the_reference_trace(run: GpuRun) -> None:
    ref = run.ref_mod.Model()
    calls = [_forward(("nvjet_tst_64x64_NNT", 40.0), ("void scale_inplace(float*)", 2.0))]
    a = run.attribute(ref, calls, None)
    assert a.heavy_alone == "gemm" and a.reference_ops == ["mm"]
    assert set(a.own_kernels) >= {"scale_inplace", "from_build"}
    assert a.own == pytest.approx(2 / 42) and a.vendor == pytest.approx(40 / 42)
    no_records = run.attribute(ref, None, "no device activity for the candidate: CUPTI")
    assert no_records.gpu_ms == 0 and no_records.heavy_alone == "gemm"
    assert "CUPTI" in (no_records.note or "")


def test_a_kept_timed_run_is_checked_against_the_reference(run: GpuRun) -> None:
    ref = run.ref_mod.Model()
    run.sets = [run.ref_mod.get_inputs(), run.ref_mod.get_inputs()]
    right = ref(*run.sets[1])
    assert run.check_timed(ref, 4, (1, right.clone())) == []
    (found,) = run.check_timed(ref, 4, (1, torch.zeros(8, 8)))
    assert found.code == "stitch.exploit.timed-output" and "timed run 4" in found.message


def test_patching_the_harness_is_seen_by_the_run(run: GpuRun) -> None:
    assert run.patched("now") == []
    real = torch.isclose
    try:
        torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)
        (found,) = run.patched("after the correctness trials")
    finally:
        torch.isclose = real
    assert found.code == "stitch.exploit.harness-patch" and "`torch.isclose`" in found.message


@pytest.mark.slow
def test_the_build_watch_keeps_every_source_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_cuda's builds (through fastcuda.build_cuda, as load_cuda calls it) are noted, so
    attribution knows the kernels a candidate compiled even when no file spells them."""
    import shutil

    from stitch_lsp.runtime import fastcuda
    from stitch_lsp.verify.worker.loading import watch_torch_builds

    if fastcuda.find_nvcc() is None and shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))
    source = 'extern "C" __global__ void made_at_run_time(float* y) { y[0] = 1.f; }\n'
    watch = BuildWatch(tmp_path / "cand.py", compile_only=False)
    real = fastcuda.build_cuda
    with watch_torch_builds(watch):
        fastcuda.build_cuda(source, name="watched", libraries=())
    assert fastcuda.build_cuda is real
    assert source in watch.sources


class _NoDouble(torch.nn.Module):
    """Deep bf16 layers with no float64 kernel (as torch._grouped_mm in transformers'
    mixture-of-experts layers): a bf16 eager result far from the exact answer."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise RuntimeError("no double kernel")
        for layer in self.layers:
            x = x + torch.tanh(layer(x)) * 2.0
        return x

    def fused(self, x: torch.Tensor) -> torch.Tensor:
        """A fused program's numbers: each layer in float registers, stored in bf16 once."""
        for layer in self.layers:
            w, b = layer.weight.float(), layer.bias.float()
            x = (x.float() + torch.tanh(x.float() @ w.T + b) * 2.0).to(torch.bfloat16)
        return x


def _bf16_miss(run: GpuRun, candidate: Any) -> Any:
    from stitch_lsp.verify.worker.correctness import compare

    torch.manual_seed(0)
    model = _NoDouble().to(torch.bfloat16)
    x = torch.randn(256, 64).to(torch.bfloat16) * 3
    with torch.no_grad():
        expected, actual = model(x), candidate(model, x)
    res = compare(0, 0, expected, actual, 1e-2, 1e-2)
    assert not res.passed  # a miss against eager bf16
    run.explain_miss(res, model, [x], expected, actual, 1e-2)
    return res


def test_a_bf16_miss_without_float64_is_cleared_by_a_float32_oracle(run: GpuRun) -> None:
    res = _bf16_miss(run, lambda m, x: m.fused(x))
    assert res.passed and res.fp64_cleared and res.oracle_dtype == "float32"
    assert res.message.startswith("cleared by the float32 oracle: in bfloat16 the reference")
    assert "from float32" in res.message and "from float64" not in res.message
    assert "no float64 run: RuntimeError: no double kernel" in res.message
    assert run._model64 is None  # the copy is not kept past the miss
    # the float64 failure is remembered: the fp32-precision oracle notes it without a rerun
    assert run._model64_errors == {torch.float64: "RuntimeError: no double kernel"}
    assert run.model64(_NoDouble()) is None


def test_a_bf16_candidate_far_from_float32_stays_a_miss(run: GpuRun) -> None:
    def wrong(m: _NoDouble, x: torch.Tensor) -> torch.Tensor:
        y = m.fused(x).float()
        return (y + 0.25 * torch.randn_like(y)).to(torch.bfloat16)

    res = _bf16_miss(run, wrong)
    assert not res.passed and not res.fp64_cleared and res.oracle_dtype == "float32"
    assert "vs the bfloat16 reference (" in res.message and "from float32" in res.message
    assert res.candidate_error_fp64 > res.reference_error_fp64
    assert "from float64" not in res.message


def test_an_fp32_reference_without_float64_gets_no_fallback(run: GpuRun) -> None:
    from stitch_lsp.verify.worker.correctness import compare

    model = _NoDouble()
    x = torch.randn(16, 64)
    expected = model(x).detach()
    actual = expected + 1.0
    res = compare(0, 0, expected, actual, 1e-4, 1e-4)
    message = res.message
    run.explain_miss(res, model, [x], expected, actual, 1e-4)
    assert not res.passed and res.message == message and res.oracle_dtype is None


def test_out_of_memory_in_float64_keeps_the_miss(
    run: GpuRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stitch_lsp.verify.worker import precision

    def no_memory(*a: Any, **k: Any) -> Any:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(precision, "run_in", no_memory)
    res = _bf16_miss(run, lambda m, x: m.fused(x))
    assert not res.passed and res.oracle_dtype is None and "oracle" not in res.message
    assert run._model64 is None and run._model64_errors == {}
