"""torchvision SqueezeNet 1.1, random weights (fire modules: squeeze 1x1, expand 1x1 and 3x3).

Full: ImageNet size, 8 images of 224x224. Small: the same network, 10 classes, 2 images of 64x64
(its pools need more than 32).
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from torchvision.models import squeezenet1_1

        torch.manual_seed(0)
        if size == "full":
            self.net = squeezenet1_1()
        else:
            self.net = squeezenet1_1(num_classes=10)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs() -> list[torch.Tensor]:
    return _common().images(small=(2, 64))


def get_init_inputs() -> list[str]:
    return _common().init_inputs()


def _common() -> ModuleType:
    """The suite's `_common.py`, loaded by path: the Verifier imports this file from elsewhere."""
    name = "stitch_real_models_common"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("_common.py"))
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]
