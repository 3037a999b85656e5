"""Capture of real library models on a CPU: each family the builtin coder handles, small size.

The captured graph is run with eager ops by the tests' interpreter and compared with the model
itself, so a library helper lowered wrongly (timm's F.batch_norm, torchvision's stochastic depth,
ResNet-D's average pool that leaves padding out) fails here, not first on the GPU machine.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.builtin.helpers import import_path
from tests.builtin.interp import run_graph

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "benchmarks" / "real_models"
MISSING = [
    n
    for n in ("torch", "torchvision", "timm", "transformers")
    if importlib.util.find_spec(n) is None
]

# Models the builtin coder captures today, by family; a regression turns one into a refusal.
HANDLED = [
    "tv_resnet18",
    "tv_resnet50",
    "tv_mobilenet_v3_small",
    "tv_efficientnet_b0",  # stochastic_depth
    "tv_convnext_tiny",  # stochastic_depth
    "tv_regnet_y_400mf",
    "tv_shufflenet_v2_x1_0",
    "tv_densenet121",
    "tv_squeezenet1_1",
    "tv_vit_b_16",
    "timm_vit_small",
    "timm_convnext_nano",
    "timm_efficientnet_b0",  # F.batch_norm in BatchNormAct2d
    "timm_mobilenetv3_large",
    "timm_regnety_008",
    "timm_resnet50d",  # AvgPool2d(ceil_mode=True, count_include_pad=False)
]


@pytest.mark.skipif(bool(MISSING), reason=f"the models extra is not installed: {MISSING}")
@pytest.mark.slow
@pytest.mark.parametrize("name", HANDLED)
def test_library_model_captures_faithfully(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from stitch_lsp.compiler.worker.capture import capture

    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "float32")
    path = SUITE / f"{name}.py"
    graph = capture(path)
    mod = import_path(path, f"family_{name}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = model(*inputs)
        (got,) = run_graph(graph, model, inputs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
