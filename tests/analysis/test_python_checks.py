"""Anti-cheating checks on candidate solutions: each one fires on the exploit and stays quiet
on the honest form of the same code."""

from __future__ import annotations

import textwrap

import pytest

from .conftest import codes, run

KERNEL = r'''
cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
ext = load_inline(name="r", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu"])
'''


def candidate(forward: str, init: str = "", top: str = KERNEL, tail: str = "") -> str:
    init_body = textwrap.indent(textwrap.dedent(init), " " * 8) if init.strip() else ""
    fwd = textwrap.indent(textwrap.dedent(forward).strip("\n"), " " * 8)
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "from torch.utils.cpp_extension import load_inline\n"
        f"{textwrap.dedent(top)}\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x):\n        return torch.relu(x)\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        f"{init_body}\n"
        "    def forward(self, x):\n"
        f"{fwd}\n"
        f"{textwrap.dedent(tail)}\n"
    )


def only(result, code: str, severity: str | None = None):
    found = codes(result, code)
    if severity:
        found = [f for f in found if f.severity.value == severity]
    return found


def serious(result):
    return [d for d in result.diagnostics if d.severity.value in ("error", "warning")]


def test_honest_candidate_is_clean() -> None:
    result = run(candidate("return ext.relu(x)"))
    assert serious(result) == [], result.diagnostics
    assert result.is_candidate


# -- torch-op ----------------------------------------------------------------------------------


def test_pure_pytorch_candidate_is_an_error() -> None:
    result = run(candidate("return F.gelu(torch.matmul(x, x))", top=""))
    errs = only(result, "torch-op", "error")
    assert len(errs) == 2
    assert "no custom CUDA kernel runs" in errs[0].message


def test_decorative_cuda_is_an_error() -> None:
    result = run(candidate("return torch.relu(x @ x)"))
    errs = only(result, "torch-op", "error")
    assert len(errs) == 2  # torch.relu and the @ matmul
    assert all("never calls it" in e.message for e in errs)


def test_light_op_beside_cuda_is_a_warning_and_gemm_is_information() -> None:
    result = run(
        candidate(
            "y = ext.relu(self.fc(x))\nreturn y.softmax(dim=-1) + torch.sigmoid(y)",
            init="self.fc = nn.Linear(4, 4)",
        )
    )
    warnings = only(result, "torch-op", "warning")
    assert sorted(w.message.split("`")[1] for w in warnings) == [".softmax()", "torch.sigmoid"]
    infos = only(result, "torch-op", "information")
    assert len(infos) == 1 and "nn.Linear" in infos[0].message


def test_layer_modules_and_views_are_classified() -> None:
    result = run(
        candidate(
            "x = x.view(x.size(0), -1).contiguous().permute(1, 0)\n"
            "y = torch.empty_like(x)\n"
            "s = torch.cuda.current_stream()\n"
            "return self.norm(ext.relu(x))",
            init="self.norm = nn.LayerNorm(4)",
        )
    )
    warnings = only(result, "torch-op", "warning")
    assert [w.message.split("`")[1] for w in warnings] == ["nn.LayerNorm"]


def test_aten_compute_in_extension_without_kernels_is_an_error() -> None:
    top = '''
    cpp = """
    #include <torch/extension.h>
    torch::Tensor f(torch::Tensor x) { return torch::relu(torch::matmul(x, x)); }
    """
    ext = load_inline(name="f", cpp_sources=cpp, cuda_sources="", functions=["f"])
    '''
    result = run(candidate("return ext.f(x)", top=top))
    errs = only(result, "torch-op", "error")
    assert {e.message.split("`")[1] for e in errs} == {"torch::relu", "torch::matmul"}


def test_weight_preparation_is_not_flagged() -> None:
    forward = (
        "scale = self.w / torch.sqrt(self.v + 1e-5)\n"
        "shift = torch.exp(scale) * 2\n"
        "return ext.relu(x) * scale + torch.sigmoid(x)"
    )
    result = run(candidate(forward, init="self.w = nn.Parameter(torch.ones(4))"))
    assert [w.message.split("`")[1] for w in only(result, "torch-op")] == ["torch.sigmoid"]


def test_math_and_numpy_are_not_pytorch() -> None:
    result = run(candidate("s = math.sqrt(x.size(-1)) + np.exp(1.0)\nreturn ext.relu(x) * s"))
    assert only(result, "torch-op") == []


def test_reference_only_file_is_not_checked() -> None:
    src = (
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n"
    )
    assert run(src).diagnostics == []


def test_header_makes_a_candidate() -> None:
    src = (
        "# stitch-lsp: reference=../problems/19_ReLU.py\n"
        "import torch\nclass Fast(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n"
    )
    result = run(src)
    assert result.reference_header == "../problems/19_ReLU.py"
    assert only(result, "torch-op", "error")


# -- torch-fallback ----------------------------------------------------------------------------


def test_try_except_fallback() -> None:
    bad = candidate("try:\n    return ext.relu(x)\nexcept Exception:\n    return torch.relu(x)")
    result = run(bad)
    assert len(only(result, "torch-fallback", "error")) == 1
    good = candidate(
        "try:\n    return ext.relu(x)\n"
        "except RuntimeError as e:\n    raise ValueError('bad input') from e"
    )
    assert only(run(good), "torch-fallback") == []


@pytest.mark.parametrize(
    "forward",
    [
        "if ext is None:\n    return torch.relu(x)\nreturn ext.relu(x)",
        "if ext is not None:\n    return ext.relu(x)\nelse:\n    return F.relu(x)",
    ],
)
def test_if_extension_missing_fallback(forward: str) -> None:
    assert only(run(candidate(forward)), "torch-fallback", "error")


def test_branch_on_shapes_is_not_a_fallback() -> None:
    forward = "if x.dim() == 2:\n    return ext.relu(x)\nreturn ext.relu(x.view(x.size(0), -1))"
    assert only(run(candidate(forward)), "torch-fallback") == []


def test_fallback_to_reference() -> None:
    bad = candidate(
        "try:\n    return ext.relu(x)\nexcept Exception:\n    return super().forward(x)"
    )
    assert only(run(bad), "torch-fallback", "error")


# -- reference-call ----------------------------------------------------------------------------


def test_inherits_from_model() -> None:
    src = candidate("return ext.relu(x)").replace(
        "class ModelNew(nn.Module)", "class ModelNew(Model)"
    )
    assert only(run(src), "reference-call", "error")


@pytest.mark.parametrize(
    "forward,init",
    [
        ("return super().forward(x)", ""),
        ("return super(ModelNew, self).forward(x)", ""),
        ("return Model.forward(self, x)", ""),
        ("return Model()(x)", ""),
        ("return self.ref(x)", "self.ref = Model()"),
    ],
)
def test_calls_the_reference(forward: str, init: str) -> None:
    assert only(run(candidate(forward, init=init)), "reference-call", "error")


def test_own_helper_module_is_not_the_reference() -> None:
    tail = "class Helper(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n"
    result = run(candidate("return self.h(x)", init="self.h = Helper()", tail=tail))
    assert serious(result) == []


# -- noop-forward ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward", ["pass", '"""Nothing."""', "return x", "return x.clone()", "..."]
)
def test_noop_forward(forward: str) -> None:
    assert only(run(candidate(forward)), "noop-forward", "error")


def test_forward_that_computes_is_not_noop() -> None:
    assert only(run(candidate("y = ext.relu(x)\nreturn y")), "noop-forward") == []


# -- streams, threads, timers --------------------------------------------------------------------


def test_side_stream_in_python_and_cuda() -> None:
    result = run(
        candidate(
            "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    y = ext.relu(x)\nreturn y"
        )
    )
    assert len(only(result, "side-stream", "warning")) == 2
    top = KERNEL.replace(
        "auto y = torch::empty_like(x);",
        "cudaStream_t st; cudaStreamCreate(&st);\n    auto y = torch::empty_like(x);",
    )
    assert len(only(run(candidate("return ext.relu(x)", top=top)), "side-stream", "warning")) == 1


def test_current_stream_is_fine() -> None:
    result = run(candidate("s = torch.cuda.current_stream()\nreturn ext.relu(x)"))
    assert only(result, "side-stream") == []


def test_threads() -> None:
    src = candidate(
        "t = threading.Thread(target=ext.relu, args=(x,))\nt.start()\nreturn x",
        top="import threading\n" + KERNEL,
    )
    assert only(run(src), "threads", "error")
    src = candidate(
        "with ThreadPoolExecutor() as pool:\n    return pool.submit(ext.relu, x).result()",
        top="from concurrent.futures import ThreadPoolExecutor\n" + KERNEL,
    )
    assert only(run(src), "threads", "error")
    # A class named Process without any threading import is somebody else's.
    src = candidate("return ext.relu(x)", tail="p = Process()\n")
    assert only(run(src), "threads") == []


@pytest.mark.parametrize(
    "line",
    [
        "torch.cuda.Event.record = lambda self, *a: None",
        "torch.cuda.Event.elapsed_time = lambda self, other: 0.001",
        "torch.cuda.synchronize = lambda *a: None",
        "time.perf_counter = lambda: 0.0",
        "setattr(torch.cuda, 'synchronize', lambda *a: None)",
        "setattr(torch.cuda.Event, 'elapsed_time', lambda *a: 0.0)",
    ],
)
def test_timer_patching(line: str) -> None:
    src = candidate("return ext.relu(x)", top="import time\n" + KERNEL, tail=line + "\n")
    assert only(run(src), "timer-patch", "error")


def test_timer_like_names_on_self_are_fine() -> None:
    src = candidate("self.time = 0.0\nself.calls = 1\nreturn ext.relu(x)")
    assert only(run(src), "timer-patch") == []


# -- downcast ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward",
    [
        "return ext.relu(x.half()).float()",
        "return ext.relu(x.to(torch.float16))",
        "return ext.relu(x.to(dtype=torch.bfloat16))",
        "with torch.autocast('cuda'):\n    return ext.relu(x)",
    ],
)
def test_downcast(forward: str) -> None:
    assert only(run(candidate(forward)), "downcast", "warning")


def test_no_downcast_when_reference_is_half_or_cast_is_up() -> None:
    assert only(run(candidate("return ext.relu(x.to(x.device).float())")), "downcast") == []
    src = candidate("return ext.relu(x.half())").replace(
        "return torch.relu(x)", "return torch.relu(x.half())"
    )
    assert only(run(src), "downcast") == []


# -- input-cache -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward",
    [
        "k = x.data_ptr()\nif k in self.cache:\n    return self.cache[k]\n"
        "y = ext.relu(x)\nself.cache[k] = y\nreturn y",
        "if x.data_ptr() == self.last_ptr:\n    return self.last\nreturn ext.relu(x)",
        "self.last_ptr = x.data_ptr()\nreturn ext.relu(x)",
        "key = (x.data_ptr(), x.shape)\nreturn self.cache.get(key) or ext.relu(x)",
        "if id(x) in self.cache:\n    return self.cache[id(x)]\nreturn ext.relu(x)",
    ],
)
def test_input_cache(forward: str) -> None:
    assert only(run(candidate(forward, init="self.cache = {}")), "input-cache", "error")


def test_data_ptr_passed_to_a_launcher_is_fine() -> None:
    forward = (
        "y = torch.empty_like(x)\n"
        "stream = torch.cuda.current_stream().cuda_stream\n"
        "ext.launch(x.data_ptr(), y.data_ptr(), x.numel(), stream)\n"
        "return y"
    )
    result = run(candidate(forward))
    assert only(result, "input-cache") == [] and only(result, "constant-output") == []
    shape_cache = "w = self.ws.get(tuple(x.shape))\nreturn ext.relu(x)"
    assert only(run(candidate(shape_cache, init="self.ws = {}")), "input-cache") == []


# -- constant-output ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward,init",
    [
        ("return torch.zeros_like(x)", ""),
        ("out = torch.empty_like(x)\nreturn out", ""),
        ("out = torch.zeros(x.shape[0], device=x.device)\nreturn out, x", ""),
        ("return self.cached", "self.cached = torch.zeros(4)"),
        ("if self.out is None:\n    self.out = ext.relu(x)\nreturn self.out", "self.out = None"),
    ],
)
def test_constant_output(forward: str, init: str) -> None:
    assert only(run(candidate(forward, init=init)), "constant-output", "error")


def test_output_written_by_a_kernel_is_fine() -> None:
    forward = "out = torch.empty_like(x)\next.relu_out(x, out)\nreturn out"
    assert only(run(candidate(forward)), "constant-output") == []
    forward = "ext.relu_out(x, self.buf)\nreturn self.buf"
    assert only(run(candidate(forward, init="self.buf = torch.empty(4)")), "constant-output") == []


def test_reference_header_file_decides_precision(tmp_path) -> None:
    from stitch_lsp.analysis import Document, analyze

    (tmp_path / "ref.py").write_text(
        "import torch\ndef get_inputs():\n    return [torch.rand(4).half()]\n"
    )
    body = candidate("return ext.relu(x.half())").replace("class Model(", "class Reference(")
    src = "# stitch-lsp: reference=ref.py\n" + body
    (tmp_path / "cand.py").write_text(src)
    result = analyze(Document.from_path(tmp_path / "cand.py"))
    assert result.reference_header == "ref.py"
    assert only(result, "downcast") == []
    (tmp_path / "ref.py").write_text(
        "import torch\ndef get_inputs():\n    return [torch.rand(4)]\n"
    )
    result = analyze(Document.from_path(tmp_path / "cand.py"))
    assert only(result, "downcast", "warning")


# -- input-mutation and TF32 -------------------------------------------------------------------


@pytest.mark.parametrize(
    "forward", ["y = ext.relu(x)\nx.zero_()\nreturn y", "y = ext.relu(x)\nx[:] = 0\nreturn y"]
)
def test_input_mutation(forward: str) -> None:
    assert only(run(candidate(forward)), "input-mutation", "warning")


def test_result_written_over_the_input() -> None:
    forward = (
        "x = x.contiguous()\ny = x\n"
        "ext.launch(x.data_ptr(), ctypes.c_void_p(y.data_ptr()), x.numel())\nreturn y"
    )
    assert only(run(candidate(forward)), "input-mutation", "warning")
    forward = "ext.relu_inplace(x)\nreturn x"
    assert only(run(candidate(forward)), "input-mutation", "warning")


def test_rebound_input_and_own_buffers_are_fine() -> None:
    forward = (
        "x = ext.scale(x)\nx.relu_()\nout = torch.empty_like(x)\nout.zero_()\n"
        "x.requires_grad_(False)\nreturn ext.relu(x)"
    )
    assert only(run(candidate(forward)), "input-mutation") == []
    forward = (
        "x = x.contiguous()\ny = torch.empty_like(x)\n"
        "ext.launch(x.data_ptr(), y.data_ptr(), x.size(0))\nreturn y"
    )
    assert only(run(candidate(forward)), "input-mutation") == []


@pytest.mark.parametrize(
    "line",
    [
        "torch.backends.cuda.matmul.allow_tf32 = True",
        "torch.set_float32_matmul_precision('high')",
    ],
)
def test_tf32(line: str) -> None:
    assert only(run(candidate("return ext.relu(x)", tail=line + "\n")), "downcast", "warning")


def test_full_precision_setting_is_fine() -> None:
    tail = (
        "torch.set_float32_matmul_precision('highest')\n"
        "torch.backends.cuda.matmul.allow_tf32 = False\n"
    )
    assert only(run(candidate("return ext.relu(x)", tail=tail)), "downcast") == []


def test_half_conversion_inside_the_kernel() -> None:
    top = KERNEL.replace(
        "if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;",
        "if (i < n) y[i] = __half2float(__float2half(x[i]));",
    )
    result = run(candidate("return ext.relu(x)", top=top))
    (finding,) = only(result, "downcast", "warning")
    assert "16-bit" in finding.message
    assert only(run(candidate("return ext.relu(x)")), "downcast") == []


def test_cupy_and_triton_kernels_count_as_custom_cuda() -> None:
    cupy_top = (
        "import cupy as cp\n"
        "relu = cp.RawKernel(r'''extern \"C\" __global__ void relu(float* x) {}''', 'relu')\n"
    )
    result = run(candidate("relu((1,), (256,), (x,))\nreturn torch.sigmoid(x)", top=cupy_top))
    assert [f.severity.value for f in only(result, "torch-op")] == ["warning"]
    triton_top = "import triton\n@triton.jit\ndef add_kernel(x_ptr, n):\n    pass\n"
    result = run(candidate("add_kernel[(1,)](x, 4)\nreturn torch.sigmoid(x)", top=triton_top))
    assert [f.severity.value for f in only(result, "torch-op")] == ["warning"]
