"""Weight preparation: stages that read parameters alone run once, and again when one changes.

A rewrite that moves work onto the weights (a pooled transposed convolution's kernel, a summed
Linear weight) leaves stages whose inputs are parameters and buffers only. The generated
forward runs them in `_stitch_prepare`, outside the graph it replays, and only when a tensor
they read was replaced or written in place. These tests drive the generated Python on the CPU
with a launcher library that records its calls; the GPU side is in test_gpu_algebra.py.
"""

from __future__ import annotations

import math
import re
import types
from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, import_path

torch = pytest.importorskip("torch")

# held-out level 2's 50 at a reduced size: the pool over the transposed convolution becomes a
# small convolution whose weight is derived from the transposed one's (pool_of_conv_transpose)
POOLED_CONV_TRANSPOSE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(3, 8, 3, stride=2, padding=1)
        self.scale1 = nn.Parameter(torch.tensor(0.5))
        self.avg_pool = nn.AvgPool3d(kernel_size=2)
        self.bias = nn.Parameter(torch.randn(8, 1, 1, 1))

    def forward(self, x):
        x = self.avg_pool(self.conv_transpose(x) * self.scale1)
        return (x + self.bias) * 1.5


def get_inputs():
    return [torch.rand(2, 3, 4, 8, 8)]


def get_init_inputs():
    return []
"""

# a softmax of a batch norm's running mean reads a buffer alone; in training mode the forward
# updates that buffer first, so the softmax must read it after the update, on every call
RUNNING_MEAN_GATE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(64)
        self.gate = nn.Parameter(torch.randn(64)){mode}

    def forward(self, x):
        y = self.bn(x)
        return y * torch.softmax(self.bn.running_mean, 0) + torch.softmax(self.gate, 0)


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
"""


def _candidate(tmp_path: Path, name: str, source: str) -> tuple[str, types.ModuleType]:
    ref = tmp_path / f"{name}.py"
    ref.write_text(source)
    cand = generate_for(ref)
    assert cand.handled, cand.reason
    path = tmp_path / f"{name}_builtin.py"
    path.write_text(cand.source or "")
    return cand.source or "", import_path(path, f"prep_{name}")


def _prepared_kernels(source: str) -> list[str]:
    body = source.split("def _stitch_prepare(self, dev):", 1)[1].split("def _launch(", 1)[0]
    return re.findall(r"lib\.(stitch_\w+)\(", body)


class _Recorder:
    """A launcher library that records what runs and succeeds."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("stitch_"):
            raise AttributeError(name)

        def launch(*args: Any) -> int:
            self.calls.append(name)
            return 0

        return launch


def test_stages_that_read_parameters_alone_are_prepared_outside_the_launches(
    tmp_path: Path,
) -> None:
    source, _ = _candidate(tmp_path, "pooled", POOLED_CONV_TRANSPOSE)
    assert "pool_of_conv_transpose" in source
    prepared = _prepared_kernels(source)
    assert prepared, "the derived convolution weight is prepared"
    launch = source.split("def _launch(", 1)[1]
    for name in prepared:
        assert f"lib.{name}(" not in launch, name
    # the launches read the prepared weight from its arena slot
    assert "# prepared by _stitch_prepare" in launch
    assert "[weight preparation]" in source and "Weight preparation:" in source
    # forward prepares before the runner, on both sides of the device guard
    forward = source.split("    def forward(", 1)[1].split("    def _stitch_params", 1)[0]
    assert forward.count("self._stitch_prepare(") == 2


_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "uint8": 1, "bool": 1}


def test_prepared_buffers_share_bytes_with_no_other(tmp_path: Path) -> None:
    # a per-call reduction after the convolution: its buffer is planned beside the prepared ones
    with_norm = POOLED_CONV_TRANSPOSE.replace(
        "return (x + self.bias) * 1.5",
        "m = torch.tanh(x + self.bias).amax(dim=(2, 3, 4))\n        return torch.softmax(m, dim=1)",
    )
    source, _ = _candidate(tmp_path, "pooled_norm", with_norm)
    layout = re.search(r"_ARENA_LAYOUT = \[(.*?)\n\]", source, re.S)
    assert layout is not None
    spans = []
    for off, shape, dtype in re.findall(r"\((\d+), \(([\d, ]*)\), torch\.(\w+)\)", layout[1]):
        dims = [int(d) for d in shape.replace(" ", "").split(",") if d]
        spans.append((int(off), int(off) + math.prod(dims) * _BYTES[dtype]))
    body = source.split("def _stitch_prepare(self, dev):", 1)[1].split("def _launch(", 1)[0]
    prepared = {int(k) for k in re.findall(r"= buf\[(\d+)\]", body)}
    assert prepared and len(prepared) < len(spans)
    for k in prepared:
        for j, (lo, hi) in enumerate(spans):
            if j != k:
                assert hi <= spans[k][0] or spans[k][1] <= lo, (k, j)


def test_preparation_runs_again_only_when_a_weight_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, new = _candidate(tmp_path, "pooled", POOLED_CONV_TRANSPOSE)
    expected = _prepared_kernels(source)
    lib = _Recorder()
    monkeypatch.setattr(new, "_load", lambda: lib)
    monkeypatch.setattr(
        new.torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=0)
    )
    model = new.ModelNew()
    cpu = torch.device("cpu")

    def runs() -> int:
        lib.calls.clear()
        model._stitch_prepare(cpu)
        if lib.calls:
            assert lib.calls == expected
        return 1 if lib.calls else 0

    assert runs() == 1  # first call
    assert runs() == 0  # nothing changed
    with torch.no_grad():
        model.conv_transpose.weight.mul_(2.0)  # in place: the version counter moves
    assert runs() == 1
    assert runs() == 0
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})  # copy_
    assert runs() == 1
    model.conv_transpose.weight = torch.nn.Parameter(torch.ones_like(model.conv_transpose.weight))
    model.__dict__.pop("_stitch_leaves", None)  # what _apply does when parameters move
    assert runs() == 1  # a new tensor: a new address
    # reads of other parameters (the bias the launches read) do not prepare again
    with torch.no_grad():
        model.bias.add_(1.0)
    assert runs() == 0
    # a write through .data bypasses the counter, as it does autograd; clearing re-prepares
    model.conv_transpose.weight.data.mul_(2.0)
    assert runs() == 0
    model._stitch_arena.prepared.clear()
    assert runs() == 1


def test_a_copied_model_prepares_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import copy

    _, new = _candidate(tmp_path, "pooled", POOLED_CONV_TRANSPOSE)
    lib = _Recorder()
    monkeypatch.setattr(new, "_load", lambda: lib)
    monkeypatch.setattr(
        new.torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=0)
    )
    model = new.ModelNew()
    model._stitch_prepare(torch.device("cpu"))
    twin = copy.deepcopy(model)
    lib.calls.clear()
    twin._stitch_prepare(torch.device("cpu"))
    assert lib.calls, "a deep copy has its own arena, so its own prepared weights"


def test_what_the_forward_writes_is_read_on_every_call(tmp_path: Path) -> None:
    training, _ = _candidate(tmp_path, "gate_train", RUNNING_MEAN_GATE.format(mode=""))
    assert "def _stitch_prepare" not in training
    evaluating, _ = _candidate(
        tmp_path, "gate_eval", RUNNING_MEAN_GATE.format(mode="\n        self.eval()")
    )
    assert "stitch_fused_softmax" in " ".join(_prepared_kernels(evaluating))


def test_inputs_are_never_prepared(tmp_path: Path) -> None:
    # every stage of a problem without parameter-only work reads the input
    source, _ = _candidate(
        tmp_path,
        "plain",
        POOLED_CONV_TRANSPOSE.replace(
            "x = self.avg_pool(self.conv_transpose(x) * self.scale1)",
            "x = torch.tanh(self.conv_transpose(x))",
        ),
    )
    assert "def _stitch_prepare" not in source


def test_weights_key_follows_versions_and_addresses() -> None:
    from stitch_lsp.runtime.graph import Arena

    w = torch.nn.Parameter(torch.ones(4))
    key = Arena.weights_key(w)
    assert Arena.weights_key(w) == key
    with torch.no_grad():
        w.copy_(torch.zeros(4))
    assert Arena.weights_key(w) != key
    with torch.inference_mode():
        frozen = torch.ones(4)
    assert Arena.weights_key(frozen) != Arena.weights_key(frozen)  # no counter: always again
