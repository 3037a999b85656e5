"""Hugging Face Qwen2 (`Qwen2ForCausalLM` from a config, random weights): the logits of a forward.

Llama-like with biased q/k/v projections. Full: Qwen2.5 0.5B's geometry (24 layers, width 896,
14 query and 2 key-value heads, vocabulary 151936, tied embeddings), 2 sequences of 512 tokens.
Small: 2 layers of width 64, 4 query and 2 key-value heads, 2 sequences of 16 tokens.
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
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "vocab_size": 151936,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "small": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "max_position_embeddings": 128,
        "vocab_size": 512,
        "num_key_value_heads": 2,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        config = Qwen2Config(**CONFIGS[size], use_cache=False)
        self.net = Qwen2ForCausalLM(config)
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
