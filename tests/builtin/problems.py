"""Small KernelBench-style problems for the builtin coder's tests.

Sizes are deliberately odd (not multiples of 4, 32 or the block size) where the op allows, so
the scalar tails and bounds checks get exercised; a few use multiples of 4 for the float4 paths.
"""

from __future__ import annotations

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def problem(init: str, forward: str, inputs: str, init_args: str = "") -> str:
    return (
        HEADER
        + "class Model(nn.Module):\n"
        + "    def __init__(self"
        + (", " + init_args if init_args else "")
        + "):\n"
        + "        super(Model, self).__init__()\n"
        + "".join(f"        {ln}\n" for ln in (init.splitlines() or ["pass"]))
        + "\n    def forward(self, x):\n"
        + "".join(f"        {ln}\n" for ln in forward.splitlines())
        + "\n\ndef get_inputs():\n"
        + f"    return [{inputs}]\n\n"
        + "def get_init_inputs():\n"
        + "    return []\n"
    )


# Every elementwise op the generator knows, chained (one compile covers them all).
ALL_ELEMENTWISE = problem(
    "self.bias = nn.Parameter(torch.randn(37))",
    "\n".join(
        [
            "x = x + self.bias",
            "x = torch.relu(x) + F.leaky_relu(x, 0.2) - F.gelu(x) * F.gelu(x, approximate='tanh')",
            "x = torch.sigmoid(x) + torch.tanh(x) + F.silu(x) + F.mish(x) + F.hardswish(x)",
            "x = F.hardtanh(x, -1.5, 1.5) + F.softplus(x) + F.softplus(x, beta=2.0, threshold=5.0)",
            "x = torch.clamp(x, min=-0.7, max=2.0) + torch.clamp(x, min=0.1) + x.clamp(max=0.3)",
            "x = 2.0 * x - 1.0 / (torch.abs(x) + 1.0) + x / 3.0 + torch.exp(-x * x)",
            "x = F.relu6(x) + F.hardsigmoid(x) + F.elu(x) + torch.sqrt(torch.abs(x) + 1.0)",
            "x = x ** 2 - torch.log(x * x + 1.0) + torch.rsqrt(x * x + 2.0) - torch.neg(x)",
            "return x",
        ]
    ),
    "torch.randn(5, 3, 37)",
)

# name -> source. Each is small enough for a quick GPU check.
PROBLEMS: dict[str, str] = {
    "elementwise_chain": ALL_ELEMENTWISE,
    "linear_relu_vec": problem(
        "self.fc = nn.Linear(64, 96)",
        "return torch.relu(self.fc(x)) * 0.5",
        "torch.randn(24, 64)",
    ),
    "linear_odd_tail": problem(
        "self.fc = nn.Linear(33, 130)\nself.scale = nn.Parameter(torch.randn(130))",
        "x = self.fc(x)\nx = x * self.scale\nreturn F.gelu(x) - 0.25",
        "torch.randn(7, 33)",
    ),
    "matmul_transposed_weight": problem(
        "self.weight = nn.Parameter(torch.randn(45, 29))",
        "x = torch.matmul(x, self.weight.T)\nx = x / 2\n"
        "return torch.sum(x, dim=1, keepdim=True) * 1.5",
        "torch.randn(13, 29)",
    ),
    "bmm": problem(
        "self.w = nn.Parameter(torch.randn(3, 17, 11))",
        "return torch.sigmoid(torch.bmm(x, self.w))",
        "torch.randn(3, 9, 17)",
    ),
    "softmax_rows": problem("", "return torch.softmax(x * 3.0, dim=1)", "torch.randn(19, 1003)"),
    "log_softmax_rows_vec": problem(
        "", "return torch.log_softmax(x, dim=-1)", "torch.randn(16, 2048)"
    ),
    "softmax_middle_dim": problem("", "return torch.softmax(x, dim=1)", "torch.randn(3, 7, 5, 9)"),
    "min_middle_then_softmax": problem(
        "",
        "x = torch.min(x, dim=2)[0]\nreturn torch.softmax(x, dim=1)",
        "torch.randn(2, 6, 5, 7, 3)",
    ),
    "reductions_last": problem(
        "",
        "a = torch.sum(x, dim=-1)\nb = torch.mean(x, dim=-1)\nc = torch.amax(x, dim=-1)\n"
        "d = torch.min(x, dim=-1)[0]\nreturn a + b * c - d",
        "torch.randn(11, 301)",
    ),
    "sum_dim0": problem("", "return x.sum(dim=0) * 0.5", "torch.randn(67, 45)"),
    "logsumexp_mish": problem(
        "",
        "x = torch.clamp(x * 2.0, -10.0, 10.0)\nx = torch.logsumexp(x, dim=1, keepdim=True)\n"
        "return x * F.mish(x)",
        "torch.randn(9, 517)",
    ),
    "layer_norm": problem(
        "self.ln = nn.LayerNorm(203)", "return self.ln(x)", "torch.randn(6, 5, 203)"
    ),
    "group_norm_conv": problem(
        "self.conv = nn.Conv2d(3, 12, 3)\nself.gn = nn.GroupNorm(4, 12)",
        "x = self.conv(x)\nx = torch.sigmoid(x)\nreturn self.gn(x)",
        "torch.randn(2, 3, 13, 11)",
    ),
    "instance_norm_conv": problem(
        "self.conv = nn.Conv2d(3, 8, 3)\nself.norm = nn.InstanceNorm2d(8)",
        "x = self.conv(x)\nx = self.norm(x)\nreturn x / 2.0",
        "torch.randn(3, 3, 10, 9)",
    ),
    "batch_norm_1d_train": problem(
        "self.fc = nn.Linear(21, 70)\nself.bn = nn.BatchNorm1d(70)",
        "x = self.fc(x)\nx = self.bn(x)\nreturn torch.relu(F.gelu(x))",
        "torch.randn(31, 21)",
    ),
    "batch_norm_2d_train": problem(
        "self.conv = nn.Conv2d(4, 6, 3)\nself.bn = nn.BatchNorm2d(6)",
        "x = self.conv(x)\nx = torch.multiply(torch.tanh(F.softplus(x)), x)\nreturn self.bn(x)",
        "torch.randn(5, 4, 9, 10)",
    ),
    "conv_transpose_clamp": problem(
        "self.ct = nn.ConvTranspose2d(4, 5, 3, stride=2, padding=1, output_padding=1)\n"
        "self.bias = nn.Parameter(torch.randn(5, 1, 1))",
        "x = self.ct(x) + self.bias\nx = torch.clamp(x, 0.0, 1.0) * 2.0\nreturn x / 2.0",
        "torch.randn(2, 4, 7, 6)",
    ),
    "global_avg_pool": problem(
        "self.conv = nn.Conv2d(3, 10, 3)",
        "x = F.gelu(self.conv(x))\nx = F.adaptive_avg_pool2d(x, 1)\n"
        "return x.squeeze(-1).squeeze(-1)",
        "torch.randn(3, 3, 17, 15)",
    ),
    "residual_clone": problem(
        "self.fc = nn.Linear(40, 36)",
        "x = self.fc(x)\ny = x.clone().detach()\nx = x * 0.5\nreturn x + y",
        "torch.randn(10, 40)",
    ),
    "rms_norm": problem(
        "",
        "rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)\nreturn x / rms",
        "torch.randn(4, 13, 6, 5)",
    ),
    "two_linears_lse": problem(
        "self.l1 = nn.Linear(30, 50)\nself.l2 = nn.Linear(50, 20)",
        "x = torch.sigmoid(self.l1(x))\nx = self.l2(x)\nreturn torch.logsumexp(x, dim=1)",
        "torch.randn(9, 30)",
    ),
}

PROBLEMS["mlp_relu_epilogues"] = problem(
    "self.l1 = nn.Linear(40, 64)\nself.l2 = nn.Linear(64, 48)\nself.l3 = nn.Linear(48, 10)",
    "x = torch.relu(self.l1(x))\nx = F.relu(self.l2(x))\nreturn self.l3(x)",
    "torch.randn(12, 40)",
)

PROBLEMS["conv_maxpool_tail"] = problem(
    "self.conv = nn.Conv2d(3, 5, 3)\nself.pool = nn.MaxPool2d(2)",
    "x = self.pool(torch.relu(self.conv(x)))\nreturn torch.sigmoid(x) * 2.0",
    "torch.randn(2, 3, 15, 12)",
)
PROBLEMS["pools_padded"] = problem(
    "",
    "a = F.max_pool2d(x, 3, 2, 1)\nb = F.avg_pool2d(x, 3, 2, 1)\nreturn a - b",
    "torch.randn(2, 4, 11, 9)",
)
# Average pools whose windows do not all count `k` elements: ceil_mode windows past the edge,
# padding left out of the count (ResNet-D's downsample), both together.
PROBLEMS["avgpool_ceil_exclude_pad"] = problem(
    "self.down = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)",
    "a = self.down(x)\nb = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)\n"
    "c = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)\nreturn a[..., :4, :4] + b + c",
    "torch.randn(2, 4, 7, 7)",
)
PROBLEMS["maxpool3d_dilated"] = problem(
    "self.pool = nn.MaxPool3d(kernel_size=2, stride=2, dilation=2)",
    "return self.pool(x) + 1.0",
    "torch.randn(2, 3, 9, 8, 7)",
)

PROBLEMS["argmax_middle"] = problem("", "return torch.argmax(x, dim=1)", "torch.randn(3, 37, 5)")
PROBLEMS["argmin_rows_ties"] = problem(
    "",
    "return torch.argmin(torch.relu(x), dim=-1)",
    "torch.randn(6, 301)",
)

# Few, long rows: each row is split over several blocks (partial states in a workspace).
PROBLEMS["split_layer_norm_odd"] = problem(
    "self.ln = nn.LayerNorm(100003)", "return self.ln(x) * 2.0", "torch.randn(3, 100003)"
)
PROBLEMS["split_batch_norm_2d"] = problem(
    "self.bn = nn.BatchNorm2d(3)", "return torch.relu(self.bn(x))", "torch.randn(4, 3, 128, 130)"
)
PROBLEMS["split_softmax_vec"] = problem(
    "", "return torch.softmax(x, dim=1)", "torch.randn(2, 98304)"
)
PROBLEMS["split_mse"] = (
    HEADER
    + "class Model(nn.Module):\n"
    + "    def __init__(self):\n"
    + "        super().__init__()\n\n"
    + "    def forward(self, predictions, targets):\n"
    + "        return torch.mean((predictions - targets) ** 2)\n\n"
    + "def get_inputs():\n"
    + "    return [torch.randn(3, 70001), torch.randn(3, 70001)]\n\n"
    + "def get_init_inputs():\n"
    + "    return []\n"
)

# Few column blocks, long reduced dim: the tile kernel splits the reduced dim over blocks too.
PROBLEMS["split_tile_batch_norm_1d"] = problem(
    "self.bn = nn.BatchNorm1d(70)", "return F.gelu(self.bn(x))", "torch.randn(4099, 70)"
)
PROBLEMS["split_tile_argmax_dim0"] = problem(
    "", "return torch.argmax(x, dim=0)", "torch.randn(5000, 33)"
)

UNSUPPORTED: dict[str, tuple[str, str]] = {
    "bernoulli": (
        problem("", "return x * torch.bernoulli(torch.sigmoid(x))", "torch.randn(4, 9)"),
        "random numbers",
    ),
    "cumprod": (problem("", "return torch.cumprod(x, dim=1)", "torch.randn(4, 9)"), "cumprod"),
    "dropout_train": (
        problem("self.d = nn.Dropout(0.5)", "return self.d(x)", "torch.randn(4, 9)"),
        "dropout",
    ),
}
# A rotary embedding's rotate_half after a Linear: `-x2` is recomputed inside the cat's kernel.
PROBLEMS["rotate_half_after_linear"] = problem(
    "self.fc = nn.Linear(32, 64)\nself.register_buffer('cos', torch.rand(64))",
    "y = self.fc(x)\n"
    "x1, x2 = y[..., :32], y[..., 32:]\n"
    "return y * self.cos + torch.cat((-x2, torch.tanh(x1)), dim=-1) * 0.5",
    "torch.randn(6, 32)",
)
# A static cache written through index_copy_: a store of the tanh kernel, into slots 4, 0, 2.
PROBLEMS["cache_index_copy"] = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 5, 6, 8))

    def forward(self, x, idx):
        self.cache.index_copy_(2, idx, torch.tanh(x) * 2)
        return self.cache.sum(dim=-1)


def get_inputs():
    return [torch.randn(2, 5, 3, 8), torch.tensor([4, 0, 2])]


def get_init_inputs():
    return []
"""
# Two kernels that neither read what the other writes: one launch, two block ranges.
PROBLEMS["two_independent_kernels"] = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        a = torch.tanh(x) * 3.0
        b = torch.sigmoid(y) - 0.5
        return torch.cat([a.flatten(), b.flatten()])


def get_inputs():
    return [torch.randn(16, 256), torch.randn(7, 143)]


def get_init_inputs():
    return []
"""
