"""Hugging Face Mistral (`MistralForCausalLM` from a config, random weights): the logits.

Like Llama, plus sliding-window attention. Full: Mistral 7B's layer geometry (width 4096, 32
query and 8 key-value heads, MLP 14336, vocabulary 32000, window 4096) with 8 of its 32 layers,
so that reference, candidate and baselines fit one GPU in fp32; 1 sequence of 512 tokens. Small:
2 layers of width 64 and a window of 8 (shorter than the 16 tokens, so the window masks), 2
sequences of 16 tokens.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.nn as nn

CONFIGS = {
    "full": {
        "num_hidden_layers": 8,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "vocab_size": 32000,
        "sliding_window": 4096,
    },
    "small": {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "max_position_embeddings": 128,
        "vocab_size": 512,
        "num_key_value_heads": 2,
        "sliding_window": 8,
    },
}


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        from transformers import MistralConfig, MistralForCausalLM

        torch.manual_seed(0)
        config = MistralConfig(**CONFIGS[size], use_cache=False)
        self.net = MistralForCausalLM(config)
        self.to(getattr(torch, dtype)).eval()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=input_ids).logits


def get_inputs() -> list[torch.Tensor]:
    c = _common()
    return c.tokens(CONFIGS[c.size()]["vocab_size"], small=(2, 16), full=(1, 512))


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
