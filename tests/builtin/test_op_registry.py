"""The op registry: one entry per op feeds capture (both paths), the planner and the checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stitch_lsp.analysis import torch_ops
from stitch_lsp.compiler import ops
from stitch_lsp.compiler.ops import OpKind, is_anchor, is_view, short_name

from .helpers import write_problem

torch = pytest.importorskip("torch")

# The static checks' heavy list as it was written by hand before the registry held it.
HEAVY_BEFORE = set(
    """
    matmul mm bmm addmm addbmm baddbmm addmv mv einsum tensordot linear bilinear conv1d conv2d
    conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc
    scaled_dot_product_attention multi_head_attention_forward lstm gru rnn_tanh rnn_relu
    """.split()  # noqa: SIM905
)


def test_the_static_checks_read_their_lists_from_the_registry() -> None:
    assert torch_ops.HEAVY_OPS == HEAVY_BEFORE
    for light in ("relu", "softmax", "layer_norm", "sum", "max_pool2d", "mse_loss", "dropout"):
        assert light in torch_ops.LIGHT_OPS
    # comparisons and masks are bookkeeping, not the work a fused kernel should absorb
    assert not {"eq", "lt", "triu", "logical_and"} & torch_ops.LIGHT_OPS
    assert {"Conv2d", "Linear", "LSTM", "MultiheadAttention"} <= torch_ops.HEAVY_LAYERS
    assert torch_ops.op_family("torch.mm") == torch_ops.op_family("nn.Linear") == "gemm"


def test_the_planner_reads_kinds_from_the_registry() -> None:
    assert is_anchor("Conv2d") and is_anchor("matmul") and is_anchor("LSTM")
    assert not is_anchor("relu") and not is_anchor("BatchNorm2d")
    assert is_view("view") and is_view("Flatten") and is_view("Dropout") and is_view("getitem")
    assert not is_view("softmax")
    assert [short_name(n) for n in ("BatchNorm2d", "ConvTranspose2d", "conv2d", "Tanh")] == [
        "bn",
        "convT",
        "conv",
        "tanh",
    ]


def test_every_spelled_op_has_a_lowering_on_its_path() -> None:
    from stitch_lsp.compiler.worker.lowering import lowered_ops

    lowered = lowered_ops()
    for name, op in ops.OPS.items():
        fx, aten = lowered.get(name, (False, False))
        if op.functions or op.methods:
            assert fx, f"{name}: spelled as torch functions or methods but no fx lowering"
        if op.aten:
            assert aten, f"{name}: spelled as ATen ops but no ATen lowering"
    assert set(lowered) <= set(ops.OPS)


@pytest.fixture
def extra_op() -> Iterator[None]:
    """Register `torch.positive` (an op the registry lacks) for one test, then forget it."""
    from stitch_lsp.compiler.worker import lowering

    assert ops.op_named("positive") is None
    ops.register_op("positive", OpKind.view, functions=("torch.positive",), methods=("positive",))

    @lowering.register_lowering("positive")
    def positive(cx: object, n: object) -> object:
        return cx.tensor(n)  # type: ignore[attr-defined]

    lowering._spellings = None
    try:
        yield
    finally:
        del ops.OPS["positive"]
        del ops._BY_NAME["positive"]
        lowering._FX.pop("positive")
        lowering._ATEN.pop("positive")
        lowering._spellings = None


POSITIVE = """
import torch
from torch import nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(torch.positive(x)) + x.positive()

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


def _fx_capture(path: Path) -> object:
    """The fx path alone (the ATen path would decompose `positive` into an alias)."""
    from stitch_lsp.compiler.worker.capture import build_on_meta
    from stitch_lsp.compiler.worker.capture_fx import FxConverter, trace

    model, inputs = build_on_meta(path)
    return FxConverter(trace(model, inputs), inputs, str(path)).run()


def test_an_op_the_registry_lacks_is_refused_by_name(tmp_path: Path) -> None:
    from stitch_lsp.compiler.ir import Unsupported

    path = write_problem(tmp_path, "positive", POSITIVE)
    with pytest.raises(Unsupported, match=r"positive .*not supported by the builtin coder"):
        _fx_capture(path)


def test_a_new_op_is_one_registration_and_one_lowering(tmp_path: Path, extra_op: None) -> None:
    from .helpers import import_path
    from .interp import run_graph

    path = write_problem(tmp_path, "positive", POSITIVE)
    graph = _fx_capture(path)
    mod = import_path(path, "positive_ref")
    x = torch.randn(4, 8)
    (got,) = run_graph(graph, mod.Model(), [x])  # type: ignore[arg-type]
    torch.testing.assert_close(got, torch.relu(x) + x)


VARIANCE = """
import torch
from torch import nn

class Model(nn.Module):
    def forward(self, x):
        a = torch.var(x, dim=-1, keepdim=True)
        b = x.std(1, unbiased=False, keepdim=True)
        c = torch.var(x, dim=(1, 2), correction=0, keepdim=True)
        return x * a + b - c + x.std()

def get_inputs():
    return [torch.randn(2, 6, 5)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("path_kind", ["fx", "aten"])
def test_var_and_std_in_every_spelling(tmp_path: Path, path_kind: str) -> None:
    """The README's example of a reduction op: one register_op, one lowering."""
    from stitch_lsp.compiler.worker.capture import build_on_meta
    from stitch_lsp.compiler.worker.capture_aten import capture_aten

    from .helpers import import_path
    from .interp import run_graph

    path = write_problem(tmp_path, "variance", VARIANCE)
    if path_kind == "fx":
        graph = _fx_capture(path)
    else:
        model, inputs = build_on_meta(path)
        graph = capture_aten(model, inputs, ["x"], str(path))
    mod = import_path(path, f"variance_{path_kind}")
    x = torch.randn(2, 6, 5)
    (got,) = run_graph(graph, mod.Model(), [x])  # type: ignore[arg-type]
    torch.testing.assert_close(got, mod.Model()(x), rtol=1e-5, atol=1e-5)
