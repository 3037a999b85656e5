"""Library idioms that the ATen-level capture meets in transformers and torchvision code, each
captured and run (with eager ops, tests/builtin/interp.py) against the model itself.

The model is traced on the meta device, where a tensor made from Python values inside forward
loses its values: `torch.tensor(0.0, device=mask.device)` (transformers' additive masks, GPT-J,
CodeGen, Bloom) and list indices `x[..., [-2], :]` (Falcon's multi-query split). An in-place op on
a view that nothing else reads (Falcon's `mlp_output += attention_output` on a reshaped GEMM
output, torchvision Swin V2's `nn.ReLU(inplace=True)` after a Linear) is computed out of place;
a write into a slice of a clone (Swin V2's `qkv_bias.clone()` with its key third zeroed) runs in
place on a clone that PyTorch makes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.compiler.ir import Graph, Unsupported

from .helpers import import_path, write_problem
from .interp import run_graph
from .problems import problem
from .problems_l3 import model
from .test_fallback import _run_fallback_lines

torch = pytest.importorskip("torch")

ADDITIVE_MASK = problem(
    "",
    "keep = x > 0.2\n"
    "bias = torch.where(keep, torch.tensor(0.0, device=x.device), torch.finfo(x.dtype).min)\n"
    "return torch.softmax(x * 3.0 + bias, dim=-1)",
    "torch.randn(4, 9)",
)
LIST_INDEX = problem(
    "self.fc = nn.Linear(8, 24)",
    "q = self.fc(x).view(x.shape[0], 6, 4)\n"
    "head, k, v = q[:, :-2, :], q[:, [-2], :], q[:, [-1], :]\n"
    "return torch.tanh(head * k + v) + q[:, [0, 3, 5], :].sum(1, keepdim=True)",
    "torch.randn(5, 8)",
)
PRIVATE_VIEW = problem(
    "self.fc = nn.Linear(8, 8, bias=False)\nself.act = nn.ReLU(inplace=True)",
    "y = self.fc(x).view(2, 3, 8)\ny += x.view(2, 3, 8)\nreturn self.act(y) * 2.0",
    "torch.randn(6, 8)",
)
# A small table made inside forward, on the input's device (and a count, as DETR-style heads
# make it with as_tensor).
TABLE = problem(
    "",
    "w = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], device=x.device)\n"
    "n = torch.as_tensor(4.0, dtype=torch.float, device=x.device)\n"
    "s = torch.as_tensor([2, 3], device=x.device)\n"
    "return torch.relu(x @ w.t() + 1.0) / n + s.float()",
    "torch.randn(4, 3)",
)
# Rows of a table picked by an int64 tensor (a rotary table at the decode position, a relative
# position bias table): a 3-D table and a 1-D one, read by a buffer of row numbers.
ROW_PICK = problem(
    "self.table = nn.Parameter(torch.randn(5, 3, 4))\n"
    "self.scale = nn.Parameter(torch.randn(5))\n"
    "self.register_buffer('rows', torch.tensor([2, 0, 4]))",
    "return x * self.table[self.rows] + self.scale[self.rows].view(3, 1, 1)",
    "torch.randn(3, 3, 4)",
)
# XLNet's attention weights: legacy constructors make CPU tensors under any device context.
LEGACY_PARAMETER = problem(
    "self.q = nn.Parameter(torch.FloatTensor(8, 2, 4))\nnn.init.normal_(self.q)",
    "return torch.einsum('bh,hnd->bnd', x, self.q).relu()",
    "torch.randn(3, 8)",
)
# Switch Transformers' router: `self.classifier = self.classifier.to(self.dtype)` in forward.
MODULE_TO = problem(
    "self.fc = nn.Linear(8, 8)",
    "self.fc = self.fc.to(torch.float32)\nreturn torch.softmax(self.fc(x), dim=-1)",
    "torch.randn(3, 8)",
)
# torchvision's Swin V2: a clone of a parameter, a slice of it zeroed, then the clone read.
CLONE_WRITE = problem(
    "self.fc = nn.Linear(8, 12)",
    "b = self.fc.bias.clone()\nb[4:8].zero_()\nreturn torch.tanh(F.linear(x, self.fc.weight, b))",
    "torch.randn(5, 8)",
)
# The base is read after the write through its view: out of place would be wrong. Captured
# faithfully or refused with the reason, never wrong.
SHARED_VIEW = problem(
    "self.fc = nn.Linear(8, 8)",
    "y = self.fc(x)\nhalf = y[:, :4]\nhalf.mul_(0.0)\nreturn y + 1.0",
    "torch.randn(3, 8)",
)


def _aten_capture(path: Path) -> Graph:
    """The ATen-level capture alone (the FX converter gets first go at plain modules)."""
    from stitch_lsp.compiler.worker.capture import build_on_meta, forward_names
    from stitch_lsp.compiler.worker.capture_aten import capture_aten

    model, inputs = build_on_meta(path)
    return capture_aten(model, inputs, forward_names(model, len(inputs)), str(path))


def _graph_and_model(graph: Graph, path: Path) -> tuple[Any, Any]:
    """(the captured graph's output, the model's own) on the problem's inputs."""
    model, inputs = _model(path)
    with torch.no_grad():
        want = model(*[t.clone() for t in inputs])
        (got,) = run_graph(graph, model, inputs)
    return got, want


def _zoo_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zoo_set: str, name: str) -> Path:
    """One of benchmarks/model_zoo.py's problems, written to `tmp_path`, at its small size."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from model_zoo import problems

    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    path = tmp_path / name
    path.write_text(problems(zoo_set)[name])
    return path


def _model(path: Path) -> tuple[Any, list[Any]]:
    mod = import_path(path, f"idiom_{path.stem}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    torch.manual_seed(1)
    return model, list(mod.get_inputs())


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("additive_mask", ADDITIVE_MASK),
        ("list_index", LIST_INDEX),
        ("private_view", PRIVATE_VIEW),
        ("table", TABLE),
        ("clone_write", CLONE_WRITE),
        ("row_pick", ROW_PICK),
        ("legacy_parameter", LEGACY_PARAMETER),
        ("module_to", MODULE_TO),
    ],
)
def test_library_idiom_is_captured_faithfully(tmp_path: Path, name: str, source: str) -> None:
    path = write_problem(tmp_path, name, source)
    graph = _aten_capture(path)
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if any(n.kind == "aten" for n in graph.nodes):  # the program's PyTorch lines, run here
        _run_fallback_lines(graph, *_model(path))


def test_rows_picked_by_a_tensor_are_a_gather_not_a_fallback(tmp_path: Path) -> None:
    graph = _aten_capture(write_problem(tmp_path, "row_pick", ROW_PICK))
    assert [n.fn for n in graph.nodes if n.kind == "gather"].count("embedding") == 2
    assert not [n.fn for n in graph.nodes if n.kind == "aten"]


def test_index_lists_keep_their_values_in_the_program(tmp_path: Path) -> None:
    graph = _aten_capture(write_problem(tmp_path, "list_index", LIST_INDEX))
    calls = [str(n.params.get("call")) for n in graph.nodes if n.kind == "aten"]
    assert any("torch.tensor([-2]" in c for c in calls), calls
    assert any("torch.tensor([0, 3, 5]" in c for c in calls), calls


# A view of the clone made before the write, read after it: it sees the write.
CLONE_SEEN_EARLIER = problem(
    "self.fc = nn.Linear(8, 8)",
    "b = self.fc.bias.clone()\nw = b[0:6]\nb[2:4].zero_()\nreturn x * w.sum() + b",
    "torch.randn(3, 8)",
)
# detach() shares the GEMM output's memory: a write through it is seen by the output.
DETACHED_ALIAS = problem(
    "self.fc = nn.Linear(8, 8)",
    "y = self.fc(x)\nz = y.detach().view(3, 2, 4)\nz += 1.0\nreturn torch.tanh(y)",
    "torch.randn(3, 8)",
)


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("shared_view", SHARED_VIEW),
        ("clone_seen_earlier", CLONE_SEEN_EARLIER),
        ("detached_alias", DETACHED_ALIAS),
    ],
)
def test_an_in_place_write_that_others_see_is_never_captured_wrong(
    tmp_path: Path, name: str, source: str
) -> None:
    path = write_problem(tmp_path, name, source)
    try:
        graph = _aten_capture(path)
    except Unsupported as exc:
        assert "in-place" in str(exc), exc
        return
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# LongT5's local attention: `scores += position_bias` where scores is a transposed view.
ADD_INTO_VIEW = problem(
    "self.fc = nn.Linear(8, 8)\nself.bias = nn.Parameter(torch.randn(4, 3))",
    "s = self.fc(x).view(3, 2, 4).transpose(1, 2)\ns += self.bias.view(1, 4, 3).transpose(1, 2)"
    "[:, :2].transpose(1, 2)\nreturn torch.softmax(s, dim=-1)",
    "torch.randn(3, 8)",
)
# timm MViTv2's relative positions: `attn[:, :, 1:, 1:] = attn[:, :, 1:, 1:] + rel`, a slice
# of a computed tensor assigned.
COPY_INTO_SLICES = problem(
    "self.fc = nn.Linear(8, 8)\nself.rel = nn.Parameter(torch.randn(2, 3))",
    "a = self.fc(x).view(3, 2, 4)\na[:, :, 1:] = a[:, :, 1:] * 2.0 + self.rel\n"
    "return torch.tanh(a)",
    "torch.randn(3, 8)",
)


@pytest.mark.parametrize(
    ("name", "source"), [("add_into_view", ADD_INTO_VIEW), ("copy_into_slices", COPY_INTO_SLICES)]
)
def test_writes_through_views_are_traced_functionally(
    tmp_path: Path, name: str, source: str
) -> None:
    """Where the plain trace refuses an in-place write through a view, the functional trace
    (out-of-place ops, scatters into the base) captures it, says so, and agrees with the model;
    the PyTorch lines it leaves (the scatters) run as the program runs them."""
    path = write_problem(tmp_path, name, source)
    graph = _aten_capture(path)
    assert any("traced functionally" in note for note in graph.notes), graph.notes
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if any(n.kind == "aten" for n in graph.nodes):
        model, inputs = _model(path)
        _run_fallback_lines(graph, model, inputs)


def test_a_forward_the_plain_trace_takes_is_not_traced_functionally(tmp_path: Path) -> None:
    graph = _aten_capture(write_problem(tmp_path, "clone_write", CLONE_WRITE))
    assert not any("functionally" in note for note in graph.notes)


def test_a_module_moved_to_another_type_inside_forward_is_refused(tmp_path: Path) -> None:
    # to its own type it is captured (test_library_idiom_is_captured_faithfully[module_to]);
    # in the model's own forward there is no submodule to run as a PyTorch call
    to_half = MODULE_TO.replace("torch.float32", "torch.float16")
    with pytest.raises(Unsupported, match=r"Linear.to\(torch.float16\) inside forward"):
        _aten_capture(write_problem(tmp_path, "module_to_half", to_half))


ROUTER_TO = """
import torch
import torch.nn as nn


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        self.fc = self.fc.to(torch.float64)  # Switch Transformers' router, "for stability"
        return torch.softmax(self.fc(x.double()), dim=-1).float()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = Router()

    def forward(self, x):
        return self.router(torch.relu(x)) * 2.0


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return []
"""


def test_a_submodule_that_changes_its_weights_type_runs_as_a_pytorch_call(tmp_path: Path) -> None:
    """The router converts its own weights on its first call, as the reference's does when the
    program calls it; the ReLU and the scale around it are generated."""
    path = tmp_path / "router_to.py"
    path.write_text(ROUTER_TO)
    graph = _aten_capture(path)
    calls = [n.params["call"] for n in graph.nodes if n.kind == "aten" and n.params.get("syncs")]
    assert calls == ["self.get_submodule('router')({0})"]
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# Funnel's relative-position bounds (`.item()` of arithmetic on an arange) and Longformer's
# default mask (`torch.ones`, tested with `.any().item()`): values computed from numbers and
# shapes alone, known at capture although the trace runs on fake tensors.
KNOWN_VALUES = problem(
    "self.fc = nn.Linear(8, 8)",
    "pos = torch.arange(8, device=x.device)\nfirst = pos.new_tensor([-3])\n"
    "top = int((torch.cat([first, pos[1::2]])[2] - pos[0]).item())\n"
    "mask = torch.ones(3, 8, device=x.device)\nmask[:, 0] = 2.0\n"
    "y = self.fc(x)\nif (mask > 1).flatten().any().item():\n    y = y * 2.0\n"
    "return y + torch.arange(top, top - 8, -1, device=x.device).float()",
    "torch.randn(3, 8)",
)
READS_AN_INPUT = problem(
    "self.fc = nn.Linear(8, 8)",
    "n = int((x > 0).sum().item())\nreturn self.fc(x) * n",
    "torch.randn(3, 8)",
)


def test_values_made_from_numbers_and_shapes_are_known_at_capture(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "known_values", KNOWN_VALUES)
    graph = _aten_capture(path)
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_value_read_from_an_input_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="_local_scalar_dense"):
        _aten_capture(write_problem(tmp_path, "reads_an_input", READS_AN_INPUT))


def test_a_large_constant_made_inside_forward_is_refused_with_its_size(tmp_path: Path) -> None:
    forward = "return x + torch.tensor([float(i) for i in range(2000)], device=x.device)"
    source = problem("", forward, "torch.randn(2000)")
    with pytest.raises(Unsupported, match=r"2000 torch\.float32 values"):
        _aten_capture(write_problem(tmp_path, "big_constant", source))


# timm's GroupNorm1 in bf16: the ATen trace keeps `detach` of the statistics nothing reads.
BF16_GROUP_NORM = problem(
    "self.conv = nn.Conv2d(8, 8, 1)\nself.norm = nn.GroupNorm(1, 8)\nself.to(torch.bfloat16)",
    "return torch.relu(self.norm(self.conv(x)))",
    "torch.randn(2, 8, 5, 5, dtype=torch.bfloat16)",
)


def test_unread_results_of_the_trace_are_left_out(tmp_path: Path) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    path = write_problem(tmp_path, "bf16_group_norm", BF16_GROUP_NORM)
    got, want = _graph_and_model(capture(path), path)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


# Wav2Vec2's LayerDrop: each layer draws `torch.rand([])` and reads it only when training.
LAYER_DROP = problem(
    "self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))\nself.eval()",
    "for layer in self.layers:\n"
    "    p = torch.rand([])\n"
    "    skip = self.training and bool(p < 0.1)\n"
    "    x = x if skip else torch.tanh(layer(x))\n"
    "return x",
    "torch.randn(3, 8)",
)
# An unread draw before a read one: the read one depends on the generator's state, so the
# unread draw cannot be dropped, and the read one has no fallback.
DRAW_THEN_NOISE = problem(
    "self.fc = nn.Linear(8, 8)",
    "torch.rand([])\nreturn self.fc(x) + torch.randn(3, 8, device=x.device)",
    "torch.randn(3, 8)",
)


def test_unread_random_draws_at_the_end_of_the_trace_are_left_out(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "layer_drop", LAYER_DROP)
    graph = _aten_capture(path)
    assert not any("rand" in n.fn for n in graph.nodes), [n.fn for n in graph.nodes]
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_an_unread_draw_before_a_read_one_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match=r"torch\.rand \(line .*draws random numbers"):
        _aten_capture(write_problem(tmp_path, "draw_then_noise", DRAW_THEN_NOISE))


# timm's BatchNormAct2d and friends apply their activation in place (`nn.SiLU(inplace=True)`,
# `nn.Hardswish(inplace=True)`, `x.sigmoid_()` in squeeze-excite gates): ATen's in-place
# overloads, which fell back to PyTorch one by one in EfficientNet and MobileNet in bf16 and
# split the fused norm-and-activation kernels.
IN_PLACE_ACTIVATIONS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.scale = nn.Parameter(torch.randn(8, 1, 1))
        self.to(torch.bfloat16)

    def forward(self, x):
        y = self.conv(x) * self.scale
        a = F.silu(y.clone(), inplace=True) + F.hardswish(y.clone(), inplace=True)
        b = y.clone().sigmoid_() * F.relu6(y.clone(), inplace=True) - y.clone().tanh_()
        c = F.leaky_relu(y.clone(), 0.1, inplace=True).clamp_(-1.0, 2.0).sub_(0.5).div_(3.0)
        d = F.hardsigmoid(y.clone(), inplace=True).mul_(2.0).add_(1.0)
        return a + b + c + d


def get_inputs():
    return [torch.randn(2, 8, 12, 12, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_in_place_activations_are_fused_not_fallbacks(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "in_place_activations", IN_PLACE_ACTIVATIONS)
    graph = _aten_capture(path)
    fallbacks = [(n.fn, n.params.get("why")) for n in graph.nodes if n.kind == "aten"]
    assert fallbacks == []
    fns = {n.fn for n in graph.nodes if n.kind == "ew"}
    assert {"silu", "hardswish", "sigmoid", "tanh", "leaky_relu", "hardsigmoid"} <= fns, fns
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


# transformers memoises tensor helpers for the life of the process (BEiT's relative position
# index, `compile_compatible_method_lru_cache`): once the model has run, a second capture in the
# same worker must still see the ops that make the index, not the first call's tensor.
def test_a_memoised_library_tensor_is_traced_again_in_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .helpers import generate_for

    monkeypatch.setenv("STITCH_MODEL_DTYPE", "bfloat16")
    path = _zoo_problem(tmp_path, monkeypatch, "more", "hf_beit.py")
    for _ in range(2):
        cand = generate_for(path)
        assert cand.handled, cand.reason
        model, inputs = _model(path)
        with torch.no_grad():
            model(*inputs)  # fills the helper's cache with a real tensor


# timm's EfficientViT: `with torch.autocast(device_type=v.device.type, enabled=False)` around
# its attention, which asked the meta device for an autocast type while tracing.
AUTOCAST = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.to(torch.bfloat16)

    def forward(self, x):
        y = self.fc(x)
        with torch.autocast(device_type=y.device.type, enabled={enabled}):
            z = torch.softmax(y.float() * 2.0, dim=-1)
        return z.to(y.dtype) + y


def get_inputs():
    return [torch.randn(4, 16, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_autocast_switched_off_is_a_plain_block(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "autocast_off", AUTOCAST.replace("{enabled}", "False"))
    graph = _aten_capture(path)
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)
    on = write_problem(tmp_path, "autocast_on", AUTOCAST.replace("{enabled}", "True"))
    with pytest.raises(Unsupported, match=r"torch\.autocast switched on"):
        _aten_capture(on)


@pytest.mark.parametrize(
    "forward",
    [
        "return self.drop(torch.clamp(torch.min(x, torch.tensor(0.0)), 0.0, 1.0))",
        "return F.dropout(torch.clamp(torch.min(self.fc(x), torch.tensor(0.0)), min=0.0), 0.3)",
        "return self.drop(torch.clamp(torch.relu(x), max=0.0)) * 2.0",
    ],
)
def test_training_dropout_of_a_value_that_is_zero_is_the_value(
    tmp_path: Path, forward: str
) -> None:
    """83_Conv3d_GroupNorm_Min_Clamp_Dropout: a training-mode dropout of min(x, 0) clamped to
    [0, 1] returns it whatever the draw (0 stays 0, NaN stays NaN), so it is captured and the
    graph agrees with the model; a dropout of anything else is still refused as random."""
    from stitch_lsp.compiler.worker.capture import capture

    src = model(
        "self.drop = nn.Dropout(0.5)\nself.fc = nn.Linear(9, 7)", forward, "torch.randn(4, 9)"
    )
    path = write_problem(tmp_path, "dropzero", src)
    graph = capture(path)
    mod = import_path(path, "dropzero_ref")
    torch.manual_seed(0)
    ref = mod.Model()
    assert ref.training
    inputs = [torch.randn(4, 9)]
    inputs[0][0, 0] = float("nan")
    with torch.no_grad():
        want = ref(*inputs)
        (got,) = run_graph(graph, ref, inputs)
    assert torch.equal(got.isnan(), want.isnan()) and bool((want.nan_to_num() == 0).all())
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize(
    "forward",
    [
        "return self.drop(torch.clamp(torch.min(x, torch.tensor(0.5)), 0.0, 1.0))",
        "return F.alpha_dropout(torch.clamp(torch.min(x, torch.tensor(0.0)), 0.0), 0.3, True)",
        "return nn.AlphaDropout(0.3)(torch.clamp(torch.min(x, torch.tensor(0.0)), 0.0))",
    ],
)
def test_training_dropout_of_anything_else_is_refused(tmp_path: Path, forward: str) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    src = model("self.drop = nn.Dropout(0.5)", forward, "torch.randn(4, 9)")
    with pytest.raises(Unsupported, match="random"):
        capture(write_problem(tmp_path, "dropsome", src))


# transformers' `is_tracing(mask)` is true for any fake tensor, so under the trace it built masks
# that eager skips. Nystromformer's landmark attention cannot take the full mask it then built
# from its default all-ones padding mask (made inside forward, so its values are known).
def test_a_mask_whose_values_are_known_is_skipped_as_eager_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _zoo_problem(tmp_path, monkeypatch, "third", "hf_nystromformer.py")
    graph = _aten_capture(path)
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


# A mask read from an input has no known values: `is_tracing` stays true for it, so the library
# keeps its mask and never asks for its values (which the trace cannot give).
INPUT_MASK = """
import torch
import torch.nn as nn
from transformers.utils import import_utils


class Model(nn.Module):
    def forward(self, x):
        known = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        read = x[:, 0] > 0
        skip_known = not import_utils.is_tracing(known) and bool(known.all())
        keep_read = import_utils.is_tracing(read) or not bool(read.all())
        return x * (2.0 if skip_known else 3.0) + (read[:, None] * x if keep_read else 0.0)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_a_mask_read_from_an_input_still_counts_as_traced(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    common = Path(__file__).resolve().parents[2] / "benchmarks" / "real_models" / "_common.py"
    name = "stitch_real_models_common"  # the name the suite's problems load it under
    (sys.modules.get(name) or import_path(common, name)).ensure_torchvision()
    path = write_problem(tmp_path, "input_mask", INPUT_MASK)
    graph = _aten_capture(path)
    got, want = _graph_and_model(graph, path)
    torch.testing.assert_close(got, want)
