"""Function-like macros with `##`: the API names they paste and the kernels they define."""

from __future__ import annotations

from stitch_lsp.cuda_macros import expand_text, invocations, macros

SOURCE = r"""
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(x) cuda##x
#define GLUE(a, b, c) a ## b ## c
#define PREFIX cublas
#define NAME(x) #x
#define ACT(op, expr) \
  __global__ void op##_kernel(const float* x, float* y, int n) { \
    int i = threadIdx.x; if (i < n) { float v = x[i]; y[i] = (expr); } }
ACT(relu, v > 0.f ? v : 0.f)
int f() {
  CAT(cublasS, gemm)(h, f(1, 2), 3);
  API(StreamCreateWithFlags)(&s, API(StreamNonBlocking));
  GLUE(cublas, Gemm, Ex)(h);
  CAT(PREFIX, Create)(&h);
  // CAT(cudnn, ConvolutionForward) in a comment is still text here; the checks skip comments
}
"""


def test_macros_are_read_with_their_parameters() -> None:
    table = macros(SOURCE)
    assert table["CAT"].params == ("a", "b") and table["PREFIX"].params is None
    assert table["ACT"].pastes and not table["NAME"].pastes
    assert "__global__ void op##_kernel" in table["ACT"].body  # continuation lines joined


def test_pasted_names_through_one_and_two_levels() -> None:
    found = {inv.pasted for inv in invocations(SOURCE)}
    assert ("cublasSgemm",) in found
    assert ("cudaStreamCreateWithFlags",) in found and ("cudaStreamNonBlocking",) in found
    assert ("cublasGemmEx",) in found
    assert ("cublasCreate",) in found  # PREFIX expanded before CAT_ pastes it
    assert ("relu_kernel",) in found


def test_arguments_next_to_paste_are_not_expanded() -> None:
    table = macros("#define PREFIX cublas\n#define P(a, b) a##b\n#define Q(a, b) P(a, b)\n")
    assert expand_text("P(PREFIX, Create)", table) == "PREFIXCreate"
    assert expand_text("Q(PREFIX, Create)", table) == "cublasCreate"


def test_no_paste_no_invocations() -> None:
    assert invocations("#define SQ(x) ((x) * (x))\nint a = SQ(3);\n") == []
