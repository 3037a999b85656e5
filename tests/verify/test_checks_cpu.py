"""The Verifier's pure parts on CPU tensors: comparison, exploit checks, source mapping, devices."""

from __future__ import annotations

import threading
import time

import pytest

from stitch_lsp.verify.devices import DevicePool, visible_gpus
from stitch_lsp.verify.source_map import SourceMap, definition_line

torch = pytest.importorskip("torch")

from stitch_lsp.verify.worker import exploits  # noqa: E402
from stitch_lsp.verify.worker.correctness import compare, flatten, same_values, tolerance  # noqa: E402


def test_compare_locates_first_mismatch_and_unwritten() -> None:
    exp = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    act = exp.clone()
    act[1, 2, 1] = 99.0
    act[1, 2, 3] = float("nan")
    res = compare(0, 0, exp, act, 1e-4, 1e-4)
    assert not res.passed
    assert res.first_mismatch == [1, 2, 1]
    assert res.expected == 21.0 and res.actual == 99.0
    assert res.mismatches == 2 and res.unwritten == 1
    assert res.max_abs_error == float("inf")
    assert "(1, 2, 1)" in res.message


def test_compare_tolerances_and_shapes() -> None:
    exp = torch.ones(8)
    assert compare(0, 0, exp, exp + 5e-5, 1e-4, 1e-4).passed
    assert not compare(0, 0, exp, exp + 5e-4, 1e-4, 1e-4).passed
    assert "shape" in compare(0, 0, exp, torch.ones(9), 1e-4, 1e-4).message
    assert tolerance(torch.float16) == 1e-2 and tolerance(torch.float32) == 1e-4
    assert compare(0, 0, exp.half(), exp.half() + 5e-3, 1e-2, 1e-2).passed


def test_compare_in_slices_agrees_with_one_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large outputs are compared slice by slice (whole-tensor temporaries ran an 80 GiB card
    out of memory on KernelBench's 6 GiB level-1 outputs): the verdict must not change."""
    from stitch_lsp.verify.worker import correctness

    gen = torch.Generator().manual_seed(0)
    expected = torch.randn(6, 7, 9, generator=gen)
    actual = (expected + 1e-6 * torch.randn(6, 7, 9, generator=gen)).transpose(0, 2)
    actual = actual.contiguous().transpose(0, 2)  # not contiguous: compared through a copy
    actual[2, 3, 4] += 0.5
    actual[4, 0, 1] = float("nan")
    actual[5, 6, 8] -= 3.0
    whole = compare(0, 0, expected, actual, 1e-4, 1e-4)
    monkeypatch.setattr(correctness, "COMPARE_SLICE", 5)
    sliced = compare(0, 0, expected, actual, 1e-4, 1e-4)
    assert sliced == whole and whole.mismatches == 3 and whole.first_mismatch == [2, 3, 4]
    assert whole.unwritten == 1 and whole.max_abs_error == float("inf")
    actual[4, 0, 1] = expected[4, 0, 1]
    finite = compare(0, 0, expected, actual, 1e-4, 1e-4)
    assert finite.max_abs_error == pytest.approx(3.0, abs=1e-4)
    monkeypatch.setattr(correctness, "COMPARE_SLICE", 1 << 26)
    assert compare(0, 0, expected, actual, 1e-4, 1e-4) == finite
    x = torch.tensor([1.0, float("nan"), 2.0, 3.0, 4.0, 5.0, 6.0])
    monkeypatch.setattr(correctness, "COMPARE_SLICE", 2)
    assert same_values([x], [x.clone()])
    y = x.clone()
    y[6] = 7.0  # in the last slice
    assert not same_values([x], [y])


def test_flatten_and_same_values() -> None:
    a, b = torch.ones(2), torch.zeros(3)
    assert flatten((a, [b])) == [a, b]
    x = torch.tensor([1.0, float("nan")])
    assert same_values([x, 3], [x.clone(), 3])
    assert not same_values([x], [torch.tensor([2.0, float("nan")])])


def test_aliasing_of_input_is_flagged_unless_the_reference_aliases_too() -> None:
    x = torch.randn(16)
    found = exploits.check_aliasing([x[4:]], [torch.relu(x)], [x], [x.clone()])
    assert [f.code for f in found] == ["stitch.exploit.alias-input"]
    xr = torch.randn(16)
    assert exploits.check_aliasing([x.view(4, 4)], [xr.view(4, 4)], [x], [xr]) == []
    ref_out = torch.randn(4)
    found = exploits.check_aliasing([ref_out], [ref_out], [x], [xr])
    assert [f.code for f in found] == ["stitch.exploit.alias-reference"]


def test_constant_output() -> None:
    ref = torch.randn(10) * 1e-6
    assert exploits.check_constant_output([torch.zeros(10)], [ref])[0].code.endswith(
        "constant-output"
    )
    assert exploits.check_constant_output([ref.clone()], [ref]) == []


def test_roofline_floor_and_its_guard() -> None:
    floor = exploits.roofline_floor_ms(4_100_000_000, None, 4.1e12, 67e12)
    assert floor == pytest.approx(1.0)
    assert exploits.roofline_floor_ms(0, 67_000_000_000, 4.1e12, 67e12) == pytest.approx(1.0)
    assert exploits.check_floor(0.5, 1.2, floor)[0].code == "stitch.exploit.faster-than-roofline"
    assert exploits.check_floor(0.95, 1.2, floor) == []
    assert exploits.check_floor(0.5, 0.6, floor) == []  # the reference beats it too: no bound


def test_flop_count_of_a_linear() -> None:
    model = torch.nn.Linear(64, 32)
    assert exploits.count_flops(model, [torch.randn(8, 64)]) == 2 * 8 * 64 * 32


def test_source_map_through_concatenated_literals() -> None:
    doc = (
        "HEADER = '''\n#include <x.h>\n'''\n"  # lines 1-3
        "BODY = r'''\n__global__ void k() {\n  oops;\n}\n'''\n"  # lines 4-8
        "SRC = HEADER + BODY\n"
    )
    compiled = "// prelude\n" + "\n#include <x.h>\n" + "\n__global__ void k() {\n  oops;\n}\n"
    sm = SourceMap(doc, compiled)
    line_of_oops = compiled.splitlines().index("  oops;") + 1
    assert sm.to_document(line_of_oops) == 6
    assert sm.to_document(compiled.splitlines().index("#include <x.h>") + 1) == 2
    assert sm.to_document(1) is None
    assert definition_line("x = 1\nclass ModelNew:\n    pass\n", "ModelNew") == 2


def test_visible_gpus_respects_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_gpus() == []


def test_pool_runs_at_most_one_job_per_device() -> None:
    pool = DevicePool(["cuda:0", "cuda:1"])
    running: dict[str, int] = {"cuda:0": 0, "cuda:1": 0}
    peak: dict[str, int] = {"cuda:0": 0, "cuda:1": 0}
    lock = threading.Lock()

    def job(i: int, device: str) -> tuple[int, str]:
        with lock:
            running[device] += 1
            peak[device] = max(peak[device], running[device])
        time.sleep(0.02)
        with lock:
            running[device] -= 1
        return i, device

    out = pool.map(job, range(12))
    assert [i for i, _ in out] == list(range(12))
    assert {d for _, d in out} == {"cuda:0", "cuda:1"}
    assert peak == {"cuda:0": 1, "cuda:1": 1}
    with pytest.raises(RuntimeError, match="no CUDA GPU"), DevicePool([]).acquire():
        pass


def test_compare_reports_the_first_mismatch_and_the_largest_errors() -> None:
    expected = torch.ones(2, 3, 4, 5)
    actual = expected.clone()
    actual[1, 2, 3, 4] = 3.0  # the largest error, last in order
    actual[0, 1, 2, 3] = 1.5  # the first mismatch
    res = compare(0, 0, expected, actual, 1e-4, 1e-4)
    assert not res.passed and res.mismatches == 2
    assert res.first_mismatch == [0, 1, 2, 3] and res.expected == 1.0 and res.actual == 1.5
    assert res.max_abs_error == 2.0 and abs(res.max_rel_error - 2.0) < 1e-3
    actual[1, 0, 0, 0] = float("nan")
    res = compare(0, 0, expected, actual, 1e-4, 1e-4)
    assert res.max_abs_error == float("inf") and res.unwritten == 1
    labels = torch.arange(12)
    wrong = labels.clone()
    wrong[7] = 0
    res = compare(0, 0, labels, wrong, 0.0, 0.0)
    assert res.first_mismatch == [7] and res.max_abs_error == 7.0
