"""Whole-model op families for the builtin coder's tests, on odd sizes.

Each entry is a KernelBench-style problem: layout ops (cat, stack, split, chunk, narrow, views,
permutes, channel shuffle), reductions over size-1 dims, `.device` / `.values` / `.indices`,
adaptive pools, dropout as the reference runs it, embedding, attention (sdpa and by hand, with
causal masks), einsum, cumsum and the Mamba "segsum", padding, and ViT's patch unfold. Some are
written so that fx cannot trace them (einops, Python over data shapes), to cover the ATen path.
`small_level3` shrinks the level-3 dev problems to sizes the CPU interpreter handles.
"""

from __future__ import annotations

import re
from pathlib import Path

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def model(init: str, forward: str, inputs: str, args: str = "x", extra: str = "") -> str:
    body = "".join(f"        {ln}\n" for ln in (init.splitlines() or ["pass"]))
    fwd = "".join(f"        {ln}\n" for ln in forward.splitlines())
    return (
        HEAD
        + extra
        + "class Model(nn.Module):\n"
        + "    def __init__(self):\n"
        + "        super().__init__()\n"
        + body
        + f"\n    def forward(self, {args}):\n"
        + fwd
        + "\n\ndef get_inputs():\n"
        + f"    return [{inputs}]\n\n"
        + "def get_init_inputs():\n"
        + "    return []\n"
    )


L3: dict[str, str] = {
    # -- concatenation ---------------------------------------------------------------------------
    "cat_dim0": model(
        "",
        "return torch.cat([torch.relu(x), x * 2.0, y], dim=0)",
        "torch.randn(3, 5, 7), torch.randn(2, 5, 7)",
        "x, y",
    ),
    "cat_dim1_conv_branches": model(
        "self.a = nn.Conv2d(3, 5, 1)\nself.b = nn.Conv2d(3, 4, 3, padding=1)",
        "y = torch.cat([self.a(x), F.relu(self.b(x)), x], 1)\nreturn torch.sigmoid(y) * 2.0",
        "torch.randn(2, 3, 9, 7)",
    ),
    "cat_dim2": model(
        "",
        "return torch.cat((x, torch.tanh(y)), dim=2) - 1.0",
        "torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4)",
        "x, y",
    ),
    "cat_last_dim": model(
        "",
        "return torch.concat([x, y.exp()], dim=-1).sum(-1)",
        "torch.randn(3, 7, 5), torch.randn(3, 7, 6)",
        "x, y",
    ),
    "stack_then_mean": model(
        "",
        "s = torch.stack([x, x * x, x + 1.0], dim=1)\nreturn s.mean(dim=1) + s[:, 2]",
        "torch.randn(5, 9)",
    ),
    "densenet_cat_bn": model(
        "self.bn = nn.BatchNorm2d(7)\nself.conv = nn.Conv2d(7, 3, 3, padding=1)",
        "feats = [x]\nfor _ in range(2):\n"
        "    y = self.conv(F.relu(self.bn(torch.cat(feats, 1)[:, :7])))\n"
        "    feats.append(y)\nreturn torch.cat(feats, 1)",
        "torch.randn(2, 7, 5, 6)",
    ),
    # -- splits, views, permutes -----------------------------------------------------------------
    "split_chunk_narrow": model(
        "",
        "a, b, c = x.split(3, dim=1)\nd, e = torch.chunk(x, 2, dim=0)\nn = x.narrow(1, 2, 4)\n"
        "return a * b - c.sum() + n[:, :3] + d.mean() - e.max()",
        "torch.randn(6, 9)",
    ),
    "split_sizes_unbind": model(
        "",
        "a, b = torch.split(x, [2, 5], dim=-1)\nrows = torch.unbind(a, dim=0)\n"
        "return b.t() @ b + rows[1].sum() * rows[0].mean()",
        "torch.randn(4, 7)",
    ),
    "permute_reshape": model(
        "self.fc = nn.Linear(6, 5)",
        "y = x.permute(0, 2, 3, 1)\ny = self.fc(y)\ny = y.reshape(y.shape[0], -1, 5)\n"
        "return y.transpose(1, 2).contiguous().view(-1, 5 * 7 * 3)",
        "torch.randn(2, 6, 7, 3)",
    ),
    "channel_shuffle": model(
        "self.conv = nn.Conv2d(6, 6, 1, groups=3)\nself.groups = 3",
        "x = self.conv(x)\nb, c, h, w = x.size()\n"
        "x = x.view(b, self.groups, c // self.groups, h, w)\n"
        "x = x.transpose(1, 2).contiguous()\nx = x.view(b, -1, h, w)\nreturn F.relu(x) + 0.5",
        "torch.randn(2, 6, 5, 3)",
    ),
    "flatten_unflatten_expand": model(
        "self.u = nn.Unflatten(1, (3, 5))",
        "y = self.u(torch.flatten(x, 1))\nz = y[:, :1].expand(-1, 3, -1)\n"
        "return (y * z).unsqueeze(1).squeeze()",
        "torch.randn(4, 15)",
    ),
    "strided_slices": model(
        "",
        "a = x[:, 0::2, 0::2, :]\nb = x[:, 1::2, 0::2, :]\nc = x[:, 0::2, 1::2, :]\n"
        "return torch.cat([a, b, c], -1) * 1.5",
        "torch.randn(2, 6, 4, 3)",
    ),
    "repeat_and_roll_free": model("", "return x.repeat(2, 1, 3) + 1.0", "torch.randn(3, 4, 2)"),
    # -- reductions over size-1 dims, values and indices
    "mean_after_global_pool": model(
        "self.conv = nn.Conv2d(3, 8, 3)\nself.pool = nn.AdaptiveAvgPool2d((1, 1))",
        "x = self.pool(F.relu(self.conv(x)))\n"
        "return torch.mean(x, dim=[2, 3]) + x.amax(dim=(2, 3))",
        "torch.randn(2, 3, 7, 9)",
    ),
    "max_values_indices": model(
        "",
        "m = torch.max(x, dim=1)\nv = m.values * 2.0\nreturn v, m.indices",
        "torch.randn(5, 11, 3)",
    ),
    "min_getitem_indices": model(
        "", "vals, idx = x.min(dim=-1)\nreturn vals + 1.0, idx", "torch.randn(4, 13)"
    ),
    "device_and_factories": model(
        "",
        "z = torch.zeros(x.size(0), 3, device=x.device)\no = torch.ones_like(x)\n"
        "return torch.cat([x + o, z], dim=1) * torch.full((1, 10), 0.5, device=x.device)",
        "torch.randn(5, 7)",
    ),
    # -- pools, dropout --------------------------------------------------------------------------
    "adaptive_pools": model(
        "self.avg = nn.AdaptiveAvgPool2d((2, 3))\nself.mx = nn.AdaptiveMaxPool2d(1)",
        "return self.avg(x) + self.mx(x), F.adaptive_avg_pool1d(x.flatten(2), 1)",
        "torch.randn(2, 3, 6, 9)",
    ),
    "maxpool_ceil_mode": model(
        "self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)",
        "return self.pool(x) * 2.0",
        "torch.randn(2, 3, 10, 9)",
    ),
    "dropout_identity": model(
        "self.d0 = nn.Dropout(0.0)\nself.d1 = nn.Dropout(0.3)\nself.d1.eval()",
        "return self.d1(self.d0(x) * 2.0) + F.dropout(x, p=0.0)",
        "torch.randn(3, 7)",
    ),
    # -- embedding -------------------------------------------------------------------------------
    "embedding": (
        HEAD
        + "class Model(nn.Module):\n"
        + "    def __init__(self):\n        super().__init__()\n"
        + "        self.emb = nn.Embedding(23, 7)\n        self.pos = nn.Embedding(5, 7)\n\n"
        + "    def forward(self, idx, pos):\n"
        + "        return F.gelu(self.emb(idx) + self.pos(pos))\n\n"
        + "def get_inputs():\n"
        + "    return [torch.randint(0, 23, (3, 5)), torch.randint(0, 5, (3, 5))]\n\n"
        + "def get_init_inputs():\n    return []\n"
    ),
    # -- attention -------------------------------------------------------------------------------
    "sdpa_causal": model(
        "",
        "return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "torch.randn(2, 3, 9, 5), torch.randn(2, 3, 9, 5), torch.randn(2, 3, 9, 5)",
        "q, k, v",
    ),
    "sdpa_mask_scale": model(
        "",
        "mask = torch.ones(7, 9, dtype=torch.bool, device=q.device).tril(diagonal=2)\n"
        "return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)",
        "torch.randn(2, 7, 6), torch.randn(2, 9, 6), torch.randn(2, 9, 4)",
        "q, k, v",
    ),
    "causal_softmax_by_hand": model(
        "self.qkv = nn.Linear(12, 36)\n"
        "self.register_buffer('bias', torch.tril(torch.ones(11, 11)).view(1, 1, 11, 11))\n"
        "self.nh = 3",
        "B, T, C = x.size()\nq, k, v = self.qkv(x).split(C, dim=2)\n"
        "q = q.view(B, T, self.nh, C // self.nh).transpose(1, 2)\n"
        "k = k.view(B, T, self.nh, C // self.nh).transpose(1, 2)\n"
        "v = v.view(B, T, self.nh, C // self.nh).transpose(1, 2)\n"
        "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
        "att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n"
        "att = F.softmax(att, dim=-1)\ny = att @ v\n"
        "return y.transpose(1, 2).contiguous().view(B, T, C)",
        "torch.randn(2, 7, 12)",
    ),
    "relu_attention_bool_mask": model(
        "self.register_buffer('mask', torch.tril(torch.ones(6, 6, dtype=torch.bool)))",
        "att = torch.relu(q @ k.transpose(-1, -2) / 2.0)\natt = att.masked_fill(~self.mask, 0.0)\n"
        "return att @ q",
        "torch.randn(3, 6, 5), torch.randn(3, 6, 5)",
        "q, k",
    ),
    "batched_matmul_broadcast": model(
        "self.w = nn.Parameter(torch.randn(5, 3))",
        "return torch.matmul(x, self.w) + torch.matmul(x, x.transpose(-1, -2)).sum(-1, "
        "keepdim=True)",
        "torch.randn(2, 3, 7, 5)",
    ),
    "multihead_attention": model(
        "self.attn = nn.MultiheadAttention(12, 3)\nself.norm = nn.LayerNorm(12)",
        "y, _ = self.attn(x, x, x)\nreturn self.norm(y + x)",
        "torch.randn(5, 2, 12)",
    ),
    # -- einsum, cumsum, masks, padding ----------------------------------------------------------
    "einsum_bmm_outer": model(
        "",
        "a = torch.einsum('bij,bjk->bik', x, y)\n"
        "b = torch.einsum('bi,bj->bij', x[:, :, 0], y[:, 0, :])\n"
        "return a + b",
        "torch.randn(2, 5, 3), torch.randn(2, 3, 5)",
        "x, y",
    ),
    "einsum_four_way": model(
        "",
        "return torch.einsum('bclhn,bcshn,bhcls,bcshp->bclhp', c, b, l, x)",
        "torch.randn(2, 3, 4, 2, 5), torch.randn(2, 3, 4, 2, 5), torch.randn(2, 2, 3, 4, 4), "
        "torch.randn(2, 3, 4, 2, 6)",
        "c, b, l, x",
    ),
    "cumsum_dims": model(
        "", "return torch.cumsum(x, dim=-1) + x.cumsum(1).exp() * 0.1", "torch.randn(3, 37, 41)"
    ),
    "cumsum_long_rows": model("", "return torch.cumsum(x * 0.01, dim=1)", "torch.randn(3, 1000)"),
    "segsum": model(
        "",
        "T = x.size(-1)\nxc = torch.cumsum(x, dim=-1)\nseg = xc[..., :, None] - xc[..., None, :]\n"
        "mask = torch.tril(torch.ones(T, T, device=x.device, dtype=bool), diagonal=0)\n"
        "seg = seg.masked_fill(~mask, -torch.inf)\nreturn torch.exp(seg)",
        "torch.randn(2, 3, 9)",
    ),
    "triu_where_pad": model(
        "",
        "y = torch.triu(x, diagonal=1) + torch.tril(x, -1) * 0.5\n"
        "y = torch.where(y > 0.2, y, -y)\nreturn F.pad(y, (1, 2, 0, 1), value=0.25)",
        "torch.randn(3, 5, 7)",
    ),
    "pad_module_conv": model(
        "self.pad = nn.ZeroPad2d((1, 0, 2, 1))\nself.conv = nn.Conv2d(2, 3, 2)",
        "return torch.relu(self.conv(self.pad(x)))",
        "torch.randn(2, 2, 5, 4)",
    ),
    "normalize_rows": model(
        "", "return F.normalize(x, dim=-1) * 3.0 + F.normalize(x, p=2, dim=0)", "torch.randn(5, 9)"
    ),
    # -- ViT's patches, class token and positions ------------------------------------------------
    "vit_patches": model(
        "self.p = 3\nself.fc = nn.Linear(2 * 3 * 3, 8)\n"
        "self.cls = nn.Parameter(torch.randn(1, 1, 8))\n"
        "self.pos = nn.Parameter(torch.randn(1, 5, 8))",
        "p = self.p\n"
        "y = x.unfold(2, p, p).unfold(3, p, p).reshape(x.shape[0], -1, p * p * x.shape[1])\n"
        "y = self.fc(y)\ncls = self.cls.expand(x.shape[0], -1, -1)\n"
        "y = torch.cat((cls, y), dim=1)\n"
        "y += self.pos\nreturn y[:, 0] + y.mean(1)",
        "torch.randn(3, 2, 6, 6)",
    ),
    # -- state kept as a plain attribute, overwritten in forward ---------------------------------
    "hidden_state_copy": model(
        "self.hidden = torch.randn(3, 4)\nself.fc = nn.Linear(9, 4)",
        "self.hidden.copy_(h)\nself.hidden = self.hidden.to(x.device)\n"
        "self.hidden = torch.tanh(self.fc(torch.cat((x, self.hidden), dim=1)))\nreturn self.hidden",
        "torch.randn(3, 5), torch.randn(3, 4)",
        "x, h",
    ),
}

# Whole-model kinds (written here, after the architectures KernelBench level 3 draws on).
KINDS: dict[str, str] = {
    "squeezenet_fire": model(
        "self.sq = nn.Conv2d(5, 3, 1)\nself.e1 = nn.Conv2d(3, 4, 1)\n"
        "self.e3 = nn.Conv2d(3, 4, 3, padding=1)\n"
        "self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)",
        "x = F.relu(self.sq(x))\nx = torch.cat([F.relu(self.e1(x)), F.relu(self.e3(x))], 1)\n"
        "return self.pool(x)",
        "torch.randn(2, 5, 13, 11)",
    ),
    "dense_block": (
        HEAD
        + "class Layer(nn.Module):\n"
        + "    def __init__(self, c, g):\n        super().__init__()\n"
        + "        self.bn = nn.BatchNorm2d(c)\n"
        + "        self.conv = nn.Conv2d(c, g, 3, padding=1)\n\n"
        + "    def forward(self, x):\n        return self.conv(F.relu(self.bn(x)))\n\n"
        + "class Model(nn.Module):\n"
        + "    def __init__(self):\n        super().__init__()\n"
        + "        self.layers = nn.ModuleList([Layer(4 + 3 * i, 3) for i in range(3)])\n\n"
        + "    def forward(self, x):\n        feats = [x]\n"
        + "        for layer in self.layers:\n"
        + "            feats.append(layer(torch.cat(feats, 1)))\n"
        + "        return torch.cat(feats, 1)\n\n"
        + "def get_inputs():\n    return [torch.randn(2, 4, 7, 5)]\n\n"
        + "def get_init_inputs():\n    return []\n"
    ),
    "regnet_head": model(
        "self.conv = nn.Conv2d(3, 6, 3, stride=2)\nself.bn = nn.BatchNorm2d(6)\n"
        "self.fc = nn.Linear(6, 5)",
        "x = F.relu(self.bn(self.conv(x)))\nx = torch.mean(x, dim=[2, 3])\nreturn self.fc(x)",
        "torch.randn(3, 3, 11, 9)",
    ),
    "netvlad": model(
        "self.k = 5\nself.clusters = nn.Parameter(torch.randn(6, 7))\n"
        "self.clusters2 = nn.Parameter(torch.randn(1, 6, 5))\nself.bn = nn.BatchNorm1d(7)",
        "n = x.size()[1]\nx = x.view(-1, 6)\na = torch.matmul(x, self.clusters)\n"
        "a = F.softmax(self.bn(a), dim=1)\na = a[:, : self.k]\na = a.view(-1, n, self.k)\n"
        "a_sum = torch.sum(a, dim=1, keepdim=True)\nc = a_sum * self.clusters2\n"
        "a = a.transpose(1, 2)\nx = x.view(-1, n, 6)\nv = torch.matmul(a, x).transpose(1, 2)\n"
        "v = F.normalize(v - c)\nv = v.reshape(-1, self.k * 6)\nreturn F.normalize(v)",
        "torch.randn(3, 9, 6)",
    ),
    "unet_step": model(
        "self.down = nn.Conv2d(3, 4, 3, padding=1)\nself.bn = nn.BatchNorm2d(4)\n"
        "self.pool = nn.MaxPool2d(2)\nself.up = nn.ConvTranspose2d(4, 4, 2, stride=2)\n"
        "self.out = nn.Conv2d(8, 2, 1)",
        "d = F.softmax(self.bn(self.down(x)), dim=-1)\nu = self.up(self.pool(d))\n"
        "return self.out(torch.cat([u, d], dim=1))",
        "torch.randn(2, 3, 10, 6)",
    ),
    "swin_windows": model(
        "self.ws = 3\nself.norm = nn.LayerNorm(5)\nself.mlp = nn.Linear(5, 5)",
        "B, H, W, C = x.shape\nws = self.ws\nx = self.norm(x)\n"
        "x = F.pad(x, (0, 0, 0, (ws - W % ws) % ws, 0, (ws - H % ws) % ws))\n"
        "Hp, Wp = x.shape[1], x.shape[2]\n"
        "w = x.view(B, Hp // ws, ws, Wp // ws, ws, C)\n"
        "w = w.permute(0, 1, 3, 2, 4, 5).contiguous()\n"
        "w = self.mlp(w.view(-1, ws * ws, C))\n"
        "x = w.view(B, Hp // ws, Wp // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5)\n"
        "x = x.reshape(B, Hp, Wp, C)\n"
        "return x[:, :H, :W, :].contiguous()",
        "torch.randn(2, 7, 8, 5)",
    ),
    # -- Swin: cyclic window shift, relative position bias, cosine attention ----------------------
    # -- DenseNet's transition: the average pool moves before the 1x1 convolution -------------
    "pool_before_pointwise_conv": model(
        "self.bn = nn.BatchNorm2d(6)\nself.conv = nn.Conv2d(6, 5, 1, bias=False)\n"
        "self.pool = nn.AvgPool2d(2, 2)",
        "return self.pool(self.conv(torch.relu(self.bn(x))))",
        "torch.randn(3, 6, 10, 7)",
    ),
    "pool_after_conv_used_twice": model(
        "self.conv = nn.Conv2d(4, 5, 1, bias=False)",
        "y = self.conv(x)\nreturn F.avg_pool2d(y, 2) + 1.0, y.sum(dim=(2, 3))",
        "torch.randn(2, 4, 6, 9)",
    ),
    "layer_norm_of_layer_norm": model(
        "self.n1 = nn.LayerNorm(7)\nself.n2 = nn.LayerNorm(7)",
        "y = self.n1(x)\nreturn self.n2(y * 2.0 + 1.0) + y",
        "torch.randn(5, 3, 7)",
    ),
    # -- an RNN cell unrolled in Python: few rows, a long K (cuBLASLt candidates are timed) -----
    "unrolled_rnn_cell": model(
        "self.i2h = nn.Linear(40 + 24, 24)\nself.h2o = nn.Linear(24, 7)",
        "outs = []\nfor t in range(x.size(0)):\n"
        "    h = torch.tanh(self.i2h(torch.cat((x[t], h), dim=1)))\n"
        "    outs.append(self.h2o(h))\n"
        "return torch.stack(outs, dim=0)",
        "torch.rand(5, 3, 40), torch.rand(3, 24)",
        args="x, h",
    ),
    "swin_cyclic_shift": model(
        "self.fc = nn.Linear(5, 5)",
        "y = torch.roll(self.fc(x), shifts=(-2, 3), dims=(1, 2))\n"
        "return y.roll(1, 1) + torch.roll(y, shifts=-1, dims=-1)",
        "torch.randn(2, 7, 6, 5)",
    ),
    "swin_relative_position_bias": model(
        "self.table = nn.Parameter(torch.randn(9, 3))\n"
        "self.register_buffer('index', torch.randint(0, 9, (4, 4)))\n"
        "self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(3, 1, 1)))",
        "q, k = F.normalize(x, dim=-1), F.normalize(x * 0.5 + 1.0, dim=-1)\n"
        "attn = q @ k.transpose(-2, -1)\n"
        "scale = torch.clamp(self.logit_scale, max=torch.log(torch.tensor(1. / 0.01, "
        "device=x.device))).exp()\n"
        "bias = self.table[self.index.view(-1)].view(4, 4, -1).permute(2, 0, 1).contiguous()\n"
        "return torch.softmax(attn * scale + 16 * torch.sigmoid(bias), dim=-1)",
        "torch.randn(2, 3, 4, 6)",
    ),
    "item_in_constructor": model(
        "rates = [r.item() for r in torch.linspace(0, 0.3, 3)]\n"
        "self.scales = rates\nself.fc = nn.Linear(6, 6)",
        "for r in self.scales:\n    x = self.fc(x) * (1.0 - r) + x\nreturn x",
        "torch.randn(3, 6)",
    ),
    "conv_vit": model(
        "self.patch = nn.Conv2d(3, 8, 3, stride=3)\nself.cls = nn.Parameter(torch.randn(1, 1, 8))\n"
        "self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)\n"
        "self.head = nn.Linear(8, 4)",
        "x = self.patch(x).flatten(2).transpose(1, 2)\n"
        "x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1)\n"
        "return self.head(self.enc(x)[:, 0])",
        "torch.randn(2, 3, 9, 6)",
    ),
}
L3 |= KINDS

# fx cannot trace these (einops, data-shaped Python): they exercise the ATen path.
EINOPS = {
    "einops_rearrange": model(
        "self.fc = nn.Linear(5, 4)",
        "y = rearrange(x, 'b (c l) h -> b h c l', l=3)\ny = torch.cumsum(y, dim=-1)\n"
        "return self.fc(rearrange(y, 'b h c l -> b (c l) h').transpose(1, 2).contiguous()[..., "
        ":5])",
        "torch.randn(2, 6, 5)",
        extra="from einops import rearrange\n\n",
    ),
    # A number made a tensor inside forward reaches the ATen path as a constant attribute.
    "einops_scalar_tensor": model(
        "",
        "y = rearrange(x, 'b (c l) -> b c l', l=2)\n"
        "return y * torch.tensor(0.25) + torch.tensor(3.0)",
        "torch.randn(3, 8)",
        extra="from einops import rearrange\n\n",
    ),
}

REFUSED = {
    "dropout_training": (
        model("self.d = nn.Dropout(0.2)", "return self.d(x)", "torch.randn(3, 4)"),
        "dropout",
    ),
    "randn_in_forward": (
        model("", "return x + torch.randn_like(x)", "torch.randn(3, 4)"),
        "random",
    ),
    "lstm_with_projection": (
        model(
            "self.rnn = nn.LSTM(4, 5, batch_first=True, proj_size=3)",
            "return self.rnn(x)[0]",
            "torch.randn(2, 3, 4)",
        ),
        "proj_size",
    ),
}

# Level-3 dev problems at sizes the CPU interpreter runs in seconds (odd where the model allows).
SMALL_LEVEL3: dict[str, dict[str, int]] = {
    "6_GoogleNetInceptionModule": dict(
        in_channels=5,
        out_1x1=3,
        reduce_3x3=4,
        out_3x3=6,
        reduce_5x5=2,
        out_5x5=3,
        pool_proj=3,
        batch_size=2,
        height=9,
        width=7,
    ),
    "13_DenseNet121TransitionLayer": dict(
        batch_size=2, num_input_features=6, num_output_features=5
    ),
    "19_MobileNetV1": dict(batch_size=1, input_channels=3, height=224, width=224, num_classes=7),
    "21_EfficientNetMBConv": dict(batch_size=2, in_channels=6, out_channels=7, kernel_size=3),
    "8_ResNetBasicBlock": dict(in_channels=3, out_channels=5, batch_size=2),
    "25_ShuffleNetUnit": dict(
        batch_size=2, input_channels=12, out_channels=24, groups=3, height=7, width=5
    ),
    "28_VisionTransformer": dict(
        image_size=12, patch_size=4, num_classes=5, dim=12, depth=2, heads=3, mlp_dim=20, channels=3
    ),
    "31_VisionAttention": dict(
        embed_dim=12, num_heads=3, batch_size=2, image_height=5, image_width=3
    ),
    "33_VanillaRNN": dict(batch_size=3, input_size=7, hidden_size=9, output_size=5),
    "43_MinGPTCausalAttention": dict(batch_size=2, max_seqlen=17, seq_len=11, n_embd=12, n_head=3),
    "44_MiniGPTBlock": dict(batch_size=2, max_seqlen=17, seq_len=11, n_embd=12, n_head=3),
    "49_Mamba2ReturnFinalState": dict(
        batch_size=2, seq_length=12, n_heads=3, d_head=5, d_state=4, block_len=4
    ),
    "50_ReLUSelfAttention": dict(batch_size=2, max_seqlen=11, n_embd=12, n_head=3),
}


def small_level3(kernelbench_dir: Path, name: str) -> str:
    """The dev problem's source with its module-level sizes replaced."""
    text = (kernelbench_dir / "level3" / f"{name}.py").read_text()
    for key, value in SMALL_LEVEL3[name].items():
        text, count = re.subn(rf"^{key}\s*=\s*[^\n#]+", f"{key} = {value}", text, flags=re.M)
        assert count == 1, (name, key)
    return text.replace("height, width = 256, 256", "height, width = 9, 7")
