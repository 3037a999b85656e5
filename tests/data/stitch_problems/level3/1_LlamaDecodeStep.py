"""One decode step of a Llama-style model at batch 1, with a static KV cache, in plain PyTorch.

The inference case a whole-model compiler meets most: one new token against a cache that was
allocated at its maximum length up front (as gpt-fast and static-cache servers do, so shapes
never change from step to step and the step can be replayed as a CUDA graph). Each layer:
RMSNorm, q/k/v projections, rotary embedding at the current position, the new key and value
written into the cache at that position, grouped-query attention over the cache with a mask that
keeps the filled prefix and the new token, the output projection, RMSNorm and a SiLU-gated MLP;
then the final RMSNorm and the LM head. The cache's prefix is filled at construction (seeded),
standing for an earlier prefill. Writing the new token's slot is idempotent: a call reads only
that slot and the prefix, so repeated calls with the same inputs agree.

Full: Llama 3.2 1B's geometry (16 layers, width 2048, 32 query and 8 key-value heads, MLP 8192,
vocabulary 128256, an untied LM head), a cache of 2048 positions with 1024 filled. Small (for
CPU tests): 2 layers of width 64, a cache of 32 with 12 filled. `STITCH_MODEL_SIZE` (`small`
default, `full`) and `STITCH_MODEL_DTYPE` (`float32` default, `bfloat16`, `float16`) choose the
case, as in benchmarks/real_models/.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "full": {
        "layers": 16,
        "dim": 2048,
        "heads": 32,
        "kv_heads": 8,
        "hidden": 8192,
        "vocab": 128256,
        "max_len": 2048,
        "filled": 1024,
        "rope_theta": 500000.0,
    },
    "small": {
        "layers": 2,
        "dim": 64,
        "heads": 4,
        "kv_heads": 2,
        "hidden": 128,
        "vocab": 512,
        "max_len": 32,
        "filled": 12,
        "rope_theta": 10000.0,
    },
}
EPS = 1e-5


class RMSNorm(nn.Module):
    """Llama's RMSNorm: normalised in fp32, scaled in the model's dtype."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderLayer(nn.Module):
    def __init__(self, c: dict, filled: torch.Tensor) -> None:
        super().__init__()
        self.heads, self.kv_heads = c["heads"], c["kv_heads"]
        self.head_dim = c["dim"] // c["heads"]
        kv_dim = self.kv_heads * self.head_dim
        self.attn_norm = RMSNorm(c["dim"])
        self.q_proj = nn.Linear(c["dim"], c["dim"], bias=False)
        self.k_proj = nn.Linear(c["dim"], kv_dim, bias=False)
        self.v_proj = nn.Linear(c["dim"], kv_dim, bias=False)
        self.o_proj = nn.Linear(c["dim"], c["dim"], bias=False)
        self.mlp_norm = RMSNorm(c["dim"])
        self.gate_proj = nn.Linear(c["dim"], c["hidden"], bias=False)
        self.up_proj = nn.Linear(c["dim"], c["hidden"], bias=False)
        self.down_proj = nn.Linear(c["hidden"], c["dim"], bias=False)
        # The static cache: (batch 1, kv heads, max_len, head_dim), its prefix already filled.
        shape = (1, self.kv_heads, c["max_len"], self.head_dim)
        self.register_buffer("k_cache", torch.randn(shape) * filled)
        self.register_buffer("v_cache", torch.randn(shape) * filled)

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        h = self.attn_norm(x)
        q = self.q_proj(h).view(1, 1, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        group = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(group, dim=1)
        values = self.v_cache.repeat_interleave(group, dim=1)
        a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = x + self.o_proj(a.transpose(1, 2).reshape(1, 1, -1))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Model(nn.Module):
    def __init__(self, size: str, dtype: str) -> None:
        super().__init__()
        c = CONFIGS[size]
        torch.manual_seed(0)
        # 1 for the filled prefix, 0 for the free slots: only the prefix holds values.
        filled = (torch.arange(c["max_len"]) < c["filled"]).to(torch.float32)[:, None]
        self.embed = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList(DecoderLayer(c, filled) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["dim"])
        self.lm_head = nn.Linear(c["dim"], c["vocab"], bias=False)
        head_dim = c["dim"] // c["heads"]
        inv_freq = 1.0 / c["rope_theta"] ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(c["max_len"]).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos_table", angles.cos())
        self.register_buffer("sin_table", angles.sin())
        self.register_buffer("positions", torch.arange(c["max_len"]))
        self.to(getattr(torch, dtype)).eval()

    def forward(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """token: (1, 1) int64, the new token; pos: (1,) int64, its position (the filled length).
        Returns the logits of the next token, (1, 1, vocab)."""
        x = self.embed(token)
        cos = self.cos_table[pos].view(1, 1, 1, -1)
        sin = self.sin_table[pos].view(1, 1, 1, -1)
        mask = (self.positions <= pos).view(1, 1, 1, -1)
        for layer in self.layers:
            x = layer(x, pos, cos, sin, mask)
        return self.lm_head(self.norm(x))


def _case() -> tuple[str, str]:
    """(size, dtype) from STITCH_MODEL_SIZE and STITCH_MODEL_DTYPE, as the real-model suite reads
    them (its shared module lives in benchmarks/real_models/; this file stands alone)."""
    size = os.environ.get("STITCH_MODEL_SIZE", "small").strip().lower() or "small"
    dtype = os.environ.get("STITCH_MODEL_DTYPE", "float32").strip().lower() or "float32"
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(dtype, dtype)
    if size not in CONFIGS:
        raise ValueError(f"STITCH_MODEL_SIZE={size!r}: expected small or full")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"STITCH_MODEL_DTYPE={dtype!r}: expected float32, bfloat16 or float16")
    return size, dtype


def get_inputs() -> list[torch.Tensor]:
    c = CONFIGS[_case()[0]]
    token = torch.randint(0, c["vocab"], (1, 1), dtype=torch.long)
    return [token, torch.tensor([c["filled"]], dtype=torch.long)]


def get_init_inputs() -> list[str]:
    return list(_case())
