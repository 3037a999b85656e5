"""CUDA checks: unused kernels, block sizes, unchecked launches; in files and in strings."""

from __future__ import annotations

from .conftest import DATA, codes, run


def cu(source: str):
    return run(source, "cuda-cpp", "file:///tmp/k.cu")


def test_bad_kernels_file() -> None:
    result = run((DATA / "bad_kernels.cu").read_text(), "cuda-cpp", "file:///tmp/bad_kernels.cu")
    unused = codes(result, "kernel-unused")
    assert [d.message.split("`")[1] for d in unused] == ["unused_kernel"]
    assert unused[0].severity.value == "warning" and unused[0].line == 4
    block = codes(result, "block-size")
    assert sorted(d.message.split(" ")[0] for d in block) == ["100", "30"]
    unchecked = codes(result, "launch-unchecked")
    assert len(unchecked) == 2 and all(d.severity.value == "hint" for d in unchecked)
    # Stream creation in a plain .cu file is not a candidate's cheat.
    assert codes(result, "side-stream") == []


def test_good_launches() -> None:
    src = """
    #define THREADS 256
    __global__ void k(float* x) {}
    __global__ void t(float* x) {}
    extern "C" __global__ void exported(float* x) {}
    void a(float* x, int n, int bs) {
        k<<<n, 256>>>(x);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        k<<<n, dim3(16, 16)>>>(x);
        AT_CUDA_CHECK(cudaGetLastError());
        k<<<n, THREADS>>>(x);
        CUDA_CHECK(cudaPeekAtLastError());
        k<<<n, bs>>>(x);
        if (cudaDeviceSynchronize() != cudaSuccess) return;
        void* args[] = {&x};
        cudaLaunchKernel((void*)t, 1, 32, args, 0, 0);
    }
    int b(float* x) { k<<<1, 32 * 4>>>(x); return (int)cudaGetLastError(); }
    """
    result = cu(src)
    assert result.diagnostics == [], result.diagnostics


def test_kernel_in_load_inline_launched_from_wrapper_or_other_string() -> None:
    src = '''
from torch.utils.cpp_extension import load_inline
kernels = r"""
__global__ void used(float* x) {}
__global__ void orphan(float* x) {}
"""
wrapper = r"""
void go(float* x) { used<<<1, 128>>>(x); C10_CUDA_KERNEL_LAUNCH_CHECK(); }
"""
ext = load_inline(name="e", cpp_sources="void go(float* x);", cuda_sources=[kernels, wrapper])
'''
    result = run(src)
    unused = codes(result, "kernel-unused")
    assert [d.message.split("`")[1] for d in unused] == ["orphan"]
    assert unused[0].line == 5  # mapped into the Python file
    assert codes(result, "launch-unchecked") == []


def test_block_size_in_string_maps_to_document() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        "SRC = '__global__ void k(float* x) {}\\nvoid go(float* x) { k<<<1, 100>>>(x); }'\n"
        "ext = load_inline('e', '', cuda_sources=SRC)\n"
    )
    result = run(src)
    (block,) = codes(result, "block-size")
    line = src.splitlines()[1]
    assert (block.line, block.column) == (2, line.index("100") + 1)
    assert block.end_column == line.index("100") + 4


def test_cuh_headers_do_not_report_unused_kernels() -> None:
    result = run("__global__ void lib_kernel(float* x) {}\n", "cuda-cpp", "file:///tmp/lib.cuh")
    assert codes(result, "kernel-unused") == []


def test_cuda_parse_error_in_string_is_information_and_mapped() -> None:
    src = (
        "from torch.utils.cpp_extension import load_inline\n"
        'SRC = r"""\n'
        "__global__ void k(float* x) { x[0] = 1.0f; }\n"
        "void go(float* x) { k<<<1, 32>>>(x); C10_CUDA_KERNEL_LAUNCH_CHECK(); }\n"
        "int broken( { ]\n"
        '"""\n'
        "ext = load_inline('e', '', cuda_sources=SRC)\n"
    )
    result = run(src)
    (err,) = codes(result, "parse-error")
    assert err.severity.value == "information" and err.line == 5
    assert {k.name for k in result.kernels} == {"k"}  # what parsed was still read


def test_kernels_without_host_code_are_not_reported_unused() -> None:
    result = cu("__global__ void k(float* x) { x[0] = 0.f; }\n")
    assert codes(result, "kernel-unused") == []
