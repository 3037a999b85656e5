"""torchvision Swin-T, random weights (shifted-window attention, relative position bias).

Full: ImageNet size, 8 images of 224x224. Small: the same SwinTransformer class, two blocks per
stage (so every stage but the last, whose 2x2 tokens fit one window, has a shifted-window block:
the roll, its window reverse and the mask built slice by slice), embedding 16, window 2,
10 classes, 2 images of 64x64.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

SMALL = {
    "patch_size": [4, 4],
    "embed_dim": 16,
    "depths": [2, 2, 2, 2],
    "num_heads": [1, 2, 2, 4],
    "window_size": [2, 2],
    "num_classes": 10,
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from torchvision.models import swin_t
        from torchvision.models.swin_transformer import SwinTransformer

        torch.manual_seed(0)
        if size == "full":
            self.net = swin_t()
        else:
            self.net = SwinTransformer(**SMALL)
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
