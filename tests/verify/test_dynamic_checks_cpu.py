"""The Verifier's newer dynamic checks on CPU tensors: patched harness globals, the output of a
timed run, outputs below atol, and the roofline floor of a fused ConvTranspose2d program."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stitch_lsp.verify.worker import exploits, harness, optrace  # noqa: E402


def test_a_patched_harness_function_is_found_and_named() -> None:
    before = harness.snapshot()
    assert "torch.isclose" in before and "torch.testing.assert_close" in before
    assert "torch.Tensor.__eq__" in before and "time.perf_counter" in before
    assert any(k.startswith("stitch_lsp.verify.worker.exploits.") for k in before)
    real = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True  # what a candidate would do
        names = harness.patched(before)
    finally:
        torch.allclose = real
    assert names == ["torch.allclose"]
    assert harness.patched(before) == []  # restored: nothing to report
    own = vars(torch.Tensor).get("__eq__")  # torch.Tensor's own, or None: inherited from C
    try:
        torch.Tensor.__eq__ = lambda a, b: True  # type: ignore[assignment,method-assign]
        assert harness.patched(before) == ["torch.Tensor.__eq__"]
    finally:
        if own is None:
            del torch.Tensor.__eq__
        else:
            torch.Tensor.__eq__ = own  # type: ignore[method-assign]
    assert harness.patched(before) == []
    found = exploits.check_harness(names, "after the correctness trials")
    assert found[0].code == "stitch.exploit.harness-patch"
    assert "`torch.allclose`" in found[0].message
    assert exploits.check_harness([], "now") == []


def test_the_verifier_s_own_functions_are_watched() -> None:
    before = harness.snapshot()
    real = exploits.check_side_stream
    try:
        exploits.check_side_stream = lambda calls: []  # type: ignore[assignment]
        assert harness.patched(before) == ["stitch_lsp.verify.worker.exploits.check_side_stream"]
    finally:
        exploits.check_side_stream = real  # type: ignore[assignment]


def test_added_attributes_are_not_patches() -> None:
    before = {"torch.allclose": torch.allclose}
    assert harness.changed(before, {"torch.allclose": torch.allclose, "torch.new": 1}) == []
    assert harness.changed(before, {}) == ["torch.allclose"]


def test_the_output_of_a_timed_run_is_checked() -> None:
    ref = [torch.randn(64)]
    assert exploits.check_timed_output(ref, [ref[0].clone()], 3) == []
    stale = [torch.zeros(64)]
    found = exploits.check_timed_output(ref, stale, 3)
    assert found[0].code == "stitch.exploit.timed-output" and "timed run 3" in found[0].message
    assert exploits.check_timed_output(ref, [], 2)[0].code == "stitch.exploit.timed-output"


def test_outputs_below_atol_are_compared_at_their_own_scale() -> None:
    torch.manual_seed(0)
    x = torch.rand(8, 65536)
    ref = torch.softmax(x, dim=1)  # every value far below 1e-4
    # Right: a warning only (allclose says little here), no finding.
    scale, warning, found = exploits.check_output_scale([ref], [ref * (1 + 1e-6)], 1e-4, 1e-4)
    assert scale is not None and scale < 1e-4 and warning and found == []
    # Wrong by 20% of the scale but within atol: the finding.
    wrong = torch.exp(x - x.max(dim=1, keepdim=True).values) / x.shape[1]
    assert torch.allclose(wrong, ref, atol=1e-4, rtol=1e-4)
    _, _, found = exploits.check_output_scale([ref], [wrong], 1e-4, 1e-4)
    assert found[0].code == "stitch.exploit.below-atol" and "tiny" in found[0].message
    # Outputs of ordinary size: nothing to say.
    assert exploits.check_output_scale([x], [x], 1e-4, 1e-4)[1:] == (None, [])
    # All zeros: the scale is 0, a warning, nothing to compare against.
    assert exploits.check_output_scale([torch.zeros(4)], [torch.zeros(4)], 1e-4, 1e-4)[2] == []


class _Level2Eleven(torch.nn.Module):
    """KernelBench level 2 problem 11's operators, at a small size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_transpose = torch.nn.ConvTranspose2d(4, 8, 5, stride=1, padding=1)
        self.batch_norm = torch.nn.BatchNorm2d(8)
        self.max_pool = torch.nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = torch.nn.GroupNorm(num_groups=2, num_channels=8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.batch_norm(self.conv_transpose(x)))
        return self.group_norm(self.max_pool(x))


def test_the_trace_counts_what_any_algorithm_must_do() -> None:
    t = optrace.trace(_Level2Eleven(), [torch.rand(2, 4, 8, 8)])
    assert t.ops[0] == "convolution" and "native_group_norm" in t.ops
    direct = 2 * 2 * 4 * 8 * 25 * 8 * 8  # transposed: over the input's 8x8 positions
    assert t.flops == direct and t.flops_floor == direct // 25
    lin = optrace.trace(torch.nn.Linear(8, 4), [torch.rand(3, 8)])
    assert lin.ops == ["t", "addmm"] and lin.flops == lin.flops_floor == 2 * 3 * 8 * 4


def test_no_false_roofline_exploit_on_the_fused_conv_transpose_program() -> None:
    """KernelBench level 2 problem 11 at its size (512x64x32x32 in, ConvTranspose2d 64->128 k5,
    BatchNorm, Tanh, MaxPool 2, GroupNorm 8) on the H200: the old floor counted the transposed
    convolution's direct FLOPs (2.15e11 at 67 TFLOP/s, 3.2 ms), which cuDNN's Winograd/FFT
    algorithms beat; the fused program then ran under 90% of it while eager, which writes and
    reads the 303 MB intermediate four more times, did not."""
    n, cin, cout, hw, k = 512, 64, 128, 32, 5
    out_hw = (hw - 1) - 2 + k  # 34, then 17 after the pool
    nbytes = 4 * (n * cin * hw * hw + n * cout * (out_hw // 2) ** 2)  # what any program moves
    assert nbytes == pytest.approx(210e6, rel=0.01)
    direct = 2 * n * cin * hw * hw * cout * k * k
    bw, peak = 4.8e12, 67e12
    old = exploits.roofline_floor_ms(nbytes, direct, bw, peak)
    new = exploits.roofline_floor_ms(nbytes, direct // (k * k), bw, peak)
    assert old == pytest.approx(3.2, rel=0.01) and new == pytest.approx(0.128, rel=0.01)
    candidate_ms, eager_ms = 2.70, 3.30  # a fast cuDNN algorithm, fused tail; eager unfused
    assert exploits.check_floor(candidate_ms, eager_ms, old)  # the false exploit
    assert exploits.check_floor(candidate_ms, eager_ms, new) == []
    # The floor still bites where the time cannot hold the bytes.
    assert exploits.check_floor(0.02, eager_ms, new)[0].code.endswith("faster-than-roofline")


def test_what_the_run_itself_imports_is_no_patch() -> None:
    """TorchDynamo rebinds torch.manual_seed on its first import (the profiler or a
    torch.compile baseline can bring it in mid-run): the snapshot is taken after it."""
    before = harness.snapshot()
    import importlib

    for name in ("torch._dynamo", "torch.profiler", "torch.utils.flop_counter"):
        importlib.import_module(name)

    t = optrace.trace(torch.nn.Conv2d(2, 2, 3), [torch.rand(1, 2, 5, 5)])
    assert t.ops == ["convolution"]
    assert harness.patched(before) == []
