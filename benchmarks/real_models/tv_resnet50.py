"""torchvision ResNet-50, random weights.

Full: ImageNet size, 8 images of 224x224. Small: the same ResNet class with one bottleneck block
per stage, 10 classes, 2 images of 32x32.
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
        from torchvision.models.resnet import Bottleneck, ResNet

        torch.manual_seed(0)
        if size == "full":
            self.net = ResNet(Bottleneck, [3, 4, 6, 3])
        else:
            self.net = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs() -> list[torch.Tensor]:
    return _common().images(small=(2, 32))


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
