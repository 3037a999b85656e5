"""torchvision ViT-B/16, random weights (patch embedding, pre-norm encoder, class token).

Full: ImageNet size, 8 images of 224x224. Small: the same VisionTransformer class, 2 layers of
width 32 with 2 heads, patches of 8, 10 classes, 2 images of 32x32.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

SMALL = {
    "image_size": 32,
    "patch_size": 8,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 32,
    "mlp_dim": 64,
    "num_classes": 10,
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from torchvision.models import vit_b_16
        from torchvision.models.vision_transformer import VisionTransformer

        torch.manual_seed(0)
        if size == "full":
            self.net = vit_b_16()
        else:
            self.net = VisionTransformer(**SMALL)
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
