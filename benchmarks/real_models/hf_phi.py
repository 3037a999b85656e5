"""Hugging Face Phi (`PhiForCausalLM` from a config, random weights): the logits of a forward.

Parallel attention and MLP blocks, LayerNorm, partial rotary embedding, GELU. Full: phi-1.5's
geometry (24 layers, width 2048, 32 heads, vocabulary 51200, half the head dims rotated), 2
sequences of 512 tokens. Small: 2 layers of width 64, 2 sequences of 16 tokens.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

CONFIGS = {
    "full": {
        "num_hidden_layers": 24,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "vocab_size": 51200,
        "partial_rotary_factor": 0.5,
    },
    "small": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "max_position_embeddings": 128,
        "vocab_size": 512,
        "partial_rotary_factor": 0.5,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from transformers import PhiConfig, PhiForCausalLM

        torch.manual_seed(0)
        config = PhiConfig(**CONFIGS[size], use_cache=False)
        self.net = PhiForCausalLM(config)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=input_ids).logits


def get_inputs() -> list[torch.Tensor]:
    c = _common()
    return c.tokens(CONFIGS[c.size()]["vocab_size"], small=(2, 16), full=(2, 512))


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
