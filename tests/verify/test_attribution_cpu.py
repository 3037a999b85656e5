"""Attribution on synthetic device activity: whose kernels ran the candidate's GPU time, and
the verdict when the reference is one heavy op alone."""

from __future__ import annotations

import pytest

from stitch_lsp.models.verify import Attribution, VerifyResult, VerifyStatus
from stitch_lsp.verify import attribution as attr
from stitch_lsp.verify.report import hover_markdown, render
from stitch_lsp.verify.timeline import Activity, Call

US = 1_000

# Kernel names as CUPTI reports them on an H100/H200 (cuBLAS 12/13, cuDNN 9, PyTorch 2.x).
NVJET = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
XMMA = (
    "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas"
)
CUTLASS = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)"
CONV = "sm90_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize64x64x8"
CUDNN_T = "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false>(...)"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)
SOFTMAX = "void (anonymous namespace)::cunn_SoftMaxForward<4, float, float>(float*, ...)"


def call(*work: tuple[str, float], kind: str = "kernel") -> Call:
    """One forward whose kernels run back to back for the given microseconds."""
    out = Call(start_ns=0, end_ns=10_000 * US, stream=7)
    t = 1.0
    for name, us in work:
        k = "memcpy" if name.startswith("Memcpy") else kind
        out.work.append(Activity(name, 7, int(t * US), int((t + us) * US), k))
        t += us + 1
    return out


def test_kernel_names_from_sources() -> None:
    cuda = r"""
    extern "C" __global__ void __launch_bounds__(256) relu_bias(const float* x, float* y) {}
    template <int TILE>
    __global__ void tiled_gemm(const float* __restrict__ a) {}
    __global__ static void
    tail_kernel (float* y) {}
    static __device__ float helper(float v) { return v; }
    void host_side(float* p) { tiled_gemm<32><<<1, 1>>>(p); }
    """
    triton = "@triton.jit\ndef add_kernel(x_ptr, n):\n    pass\n"
    assert attr.kernel_names([cuda, triton]) == {"relu_bias", "tiled_gemm", "tail_kernel",
                                                 "add_kernel"}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (NVJET, "vendor"),
        (XMMA, "vendor"),
        (CUTLASS, "vendor"),
        (CONV, "vendor"),
        (CUDNN_T, "vendor"),
        ("void implicit_convolve_sgemm<float, float, 128, 5, 5>(int, ...)", "vendor"),
        ("ampere_sgemm_128x64_nn", "vendor"),
        ("void gemmSN_NN_kernel<float, 256, 4>(cublasGemmSmallNParams<...>)", "vendor"),
        (ELEMENTWISE, "pytorch"),
        (SOFTMAX, "pytorch"),
        ("triton_poi_fused_add_relu_0", "pytorch"),
        ("void at::native::reduce_kernel<512, 1>(...)", "pytorch"),
        ("void scale_inplace(float*, float, long long)", "own"),
        ("relu_bias", "own"),
        ("void tiled_gemm<32>(float const*)", "own"),
        ("stitch_gemm_epilogue_3_kernel", "own"),  # the builtin coder's and runtime's kernels
        ("Memcpy DtoD (Device -> Device)", "other"),
        ("void mystery_kernel(float*)", "other"),
    ],
)
def test_classify(name: str, expected: str) -> None:
    own = {"scale_inplace", "relu_bias", "tiled_gemm"}
    got = attr.classify(name, own) if not name.startswith("Memcpy") else "other"
    assert got == expected


def test_a_decoy_named_like_a_library_kernel_stays_the_library_s() -> None:
    decoys = {"vectorized_elementwise_kernel", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"}
    assert attr.classify(ELEMENTWISE, decoys) == "pytorch"
    assert attr.classify(NVJET, decoys) == "vendor"
    # An honest kernel whose name says gemm is the candidate's when it defines it.
    assert attr.classify("void gemm_kernel(float*)", {"gemm_kernel"}) == "own"
    assert attr.classify("void gemm_kernel(float*)", set()) == "vendor"


@pytest.mark.parametrize(
    ("ops", "family"),
    [
        (["mm"], "gemm"),
        (["t", "addmm"], "gemm"),  # nn.Linear
        (["aten.convolution.default"], "conv"),
        (["contiguous", "view", "bmm", "_unsafe_view"], "gemm"),
        (["convolution", "mm"], "conv+gemm"),
        (["_scaled_dot_product_flash_attention"], "attention"),  # sdpa alone
        (["t", "addmm", "_scaled_dot_product_efficient_attention"], "attention+gemm"),
        (["t", "addmm", "native_layer_norm", "_scaled_dot_product_cudnn_attention"], None),
        (["t", "addmm", "relu"], None),  # GEMM + epilogue: a fused program may keep the GEMM
        (["convolution", "native_batch_norm", "tanh"], None),
        (["relu"], None),
        ([], None),
    ],
)
def test_heavy_alone(ops: list[str], family: str | None) -> None:
    assert attr.heavy_alone(ops) == family


def test_shares_and_top_kernels() -> None:
    calls = [call((NVJET, 90.0), ("void scale_inplace(float*)", 8.0), ("Memcpy DtoD", 2.0))] * 3
    a = attr.attribute(calls, {"scale_inplace"}, reference_ops=["mm"])
    assert a.own == pytest.approx(0.08) and a.vendor == pytest.approx(0.90)
    assert a.other == pytest.approx(0.02) and a.pytorch == 0.0
    assert a.gpu_ms == pytest.approx(0.1)
    assert a.top["vendor"][0].name == NVJET and a.top["own"][0].name == "scale_inplace"
    assert a.heavy_alone == "gemm" and a.reference_ops == ["mm"]
    assert attr.describe(a) == (
        f"custom kernels: 8% of GPU time (vendor 90%: {NVJET}; other 2%: Memcpy DtoD)"
    )


def test_the_heavy_op_in_a_library_with_a_decorative_kernel_is_an_exploit() -> None:
    # torch::matmul in the wrapper (cuBLAS) and an in-place scale kernel: 1024^3 GEMM vs 4 MB.
    calls = [call((XMMA, 43.0), ("void scale_inplace(float*, float, long long)", 2.5))] * 3
    found = attr.judge(attr.attribute(calls, {"scale_inplace"}, reference_ops=["mm"]))
    assert found is not None and found.code == "stitch.exploit.heavy-op-not-custom"
    assert "sm90_xmma_gemm" in found.message and "a GEMM alone" in found.message
    assert found.evidence["own_share"] == pytest.approx(2.5 / 45.5, abs=1e-3)
    # cuDNN for a convolution-only reference, the bias in a custom kernel.
    conv = [call((CUDNN_T, 5.0), (CONV, 80.0), ("void add_bias(float*)", 6.0))]
    found = attr.judge(attr.attribute(conv, {"add_bias"}, reference_ops=["convolution"]))
    assert found is not None and "a convolution alone" in found.message
    # F.linear on PyTorch's side (nvjet) plus a bias kernel, reference nn.Linear.
    lin = [call((NVJET, 170.0), ("void bias_add(float*)", 4.0))]
    assert attr.judge(attr.attribute(lin, {"bias_add"}, reference_ops=["t", "addmm"]))


def test_honest_programs_are_not_flagged() -> None:
    # A custom GEMM for a matmul-only problem, with a PyTorch fill for the output.
    own = [call(("void tiled_gemm<32>(float const*)", 95.0), (ELEMENTWISE, 1.0))]
    a = attr.attribute(own, {"tiled_gemm"}, reference_ops=["mm"])
    assert a.own > 0.9 and attr.judge(a) is None
    # The builtin coder's fused program: cuBLAS GEMM plus its fused epilogue; the reference is
    # GEMM + ReLU, not the GEMM alone, so the vendor GEMM is legitimate and only reported.
    fused = [call((NVJET, 80.0), ("stitch_ew_1_kernel", 18.0), ("Memcpy DtoD", 2.0))]
    a = attr.attribute(fused, set(), reference_ops=["t", "addmm", "relu"])
    assert a.heavy_alone is None and attr.judge(a) is None
    assert attr.describe(a).startswith("custom kernels: 18% of GPU time (vendor 80%")
    # Kernels we cannot place (a name built at run time) never count as the library's.
    unknown = [call(("void k_4f2a(float*)", 90.0), (ELEMENTWISE, 5.0))]
    assert attr.judge(attr.attribute(unknown, set(), reference_ops=["mm"])) is None
    # Nothing recorded: no verdict.
    assert attr.judge(attr.attribute([], set(), reference_ops=["mm"])) is None


def test_the_share_is_in_the_report_and_the_hover() -> None:
    a = attr.attribute(
        [call((NVJET, 82.0), ("stitch_ew_1_kernel", 18.0))], set(), reference_ops=["t", "addmm"]
    )
    result = VerifyResult(status=VerifyStatus.passed, attribution=a)
    assert "custom kernels: 18% of GPU time (vendor 82%" in render(result)
    assert "the reference is gemm alone (addmm)" in render(result)
    assert "custom kernels: 18% of GPU time" in hover_markdown(result, "passed")
    assert Attribution.model_validate_json(a.model_dump_json()) == a
