"""Hugging Face BERT (`BertModel` from a config, random weights, no pooler): last_hidden_state.

Full: bert-base (12 layers, width 768), 4 sequences of 512 tokens. Small: 2 layers of width 64,
a vocabulary of 512, 2 sequences of 16 tokens.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

CONFIGS = {
    "full": {"vocab_size": 30522},  # BertConfig's defaults are bert-base-uncased
    "small": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "max_position_embeddings": 128,
        "vocab_size": 512,
    },
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        torch.manual_seed(0)
        config = BertConfig(**CONFIGS[size], use_cache=False)
        self.net = BertModel(config, add_pooling_layer=False)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=input_ids).last_hidden_state


def get_inputs() -> list[torch.Tensor]:
    c = _common()
    return c.tokens(CONFIGS[c.size()]["vocab_size"], small=(2, 16), full=(4, 512))


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
