"""GPU: the programs that exact algebra shortens match their references on a GPU.

Each problem is a held-out level-2 shape at a reduced size: a mean over a Linear less a
parameter (`sum_before_linear`, 51), an average pool over a Linear (`pool_before_linear`, 98)
and the means of transposed convolutions (`spatial_sum_of_conv_transpose`): global over an
unpadded one (42) and a padded, strided one (44), and over the depth of a padded 3-D one (13);
and an average pool over a transposed convolution as a small convolution
(`pool_of_conv_transpose`, 50). The weights each program derives are prepared once and again
after every change (a new state dict, an in-place write).
The CPU side (the identities against float64) is in test_rewrites.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import on_gpu, write_problem

torch = pytest.importorskip("torch")

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
_TAIL = "\n\ndef get_init_inputs():\n    return []\n"

PROBLEMS = {
    "sum_before_linear": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.gemm = nn.Linear(1024, 2048)\n"
        "        self.subtract = nn.Parameter(torch.randn(2048))\n\n"
        "    def forward(self, x):\n"
        "        y = torch.mean(self.gemm(x) - self.subtract, dim=1, keepdim=True)\n"
        "        return F.gelu(torch.logsumexp(y, dim=1, keepdim=True)) + x\n\n\n"
        "def get_inputs():\n    return [torch.randn(256, 1024)]\n"
    ),
    "pool_before_linear": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.matmul = nn.Linear(1024, 2048)\n"
        "        self.avg_pool = nn.AvgPool1d(16)\n\n"
        "    def forward(self, x):\n"
        "        y = self.avg_pool(self.matmul(x).unsqueeze(1)).squeeze(1)\n"
        "        return torch.max(F.gelu(y) * 2.0, dim=1).values\n\n\n"
        "def get_inputs():\n    return [torch.randn(256, 1024)]\n"
    ),
    "spatial_sum_of_conv_transpose": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv_transpose = nn.ConvTranspose2d(16, 32, 3)\n"
        "        self.bias = nn.Parameter(torch.randn(32, 1, 1))\n\n"
        "    def forward(self, x):\n"
        "        y = torch.mean(self.conv_transpose(x), dim=(2, 3), keepdim=True) + self.bias\n"
        "        return torch.logsumexp(y, dim=1, keepdim=True).sum(dim=(2, 3)) * 10.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 16, 64, 64)]\n"
    ),
    "spatial_sum_of_conv_transpose/padded": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv_transpose = nn.ConvTranspose2d(\n"
        "            16, 32, 3, stride=2, padding=1, output_padding=1\n"
        "        )\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv_transpose(x) * 0.5\n"
        "        x = torch.mean(x, dim=[2, 3], keepdim=True)\n"
        "        return torch.mean(x, dim=[2, 3], keepdim=True)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 16, 64, 64)]\n"
    ),
    "spatial_sum_of_conv_transpose/depth": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv_transpose = nn.ConvTranspose3d(8, 32, 3, padding=1)\n"
        "        self.bias = nn.Parameter(torch.randn(1, 32, 1, 1, 1))\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv_transpose(x).mean(dim=2, keepdim=True) + self.bias\n"
        "        return torch.tanh(torch.softmax(x, dim=1)) * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8, 16, 32, 32)]\n"
    ),
    "pool_of_conv_transpose": (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv_transpose = nn.ConvTranspose3d(3, 16, 3, stride=2, padding=1)\n"
        "        self.scale1 = nn.Parameter(torch.tensor(0.5))\n"
        "        self.avg_pool = nn.AvgPool3d(kernel_size=2)\n"
        "        self.bias = nn.Parameter(torch.randn(16, 1, 1, 1))\n\n"
        "    def forward(self, x):\n"
        "        x = self.avg_pool(self.conv_transpose(x) * self.scale1)\n"
        "        return (x + self.bias) * 1.5\n\n\n"
        "def get_inputs():\n    return [torch.rand(16, 3, 16, 32, 32)]\n"
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(PROBLEMS))
def test_rewritten_programs_match_the_model_on_the_gpu(tmp_path: Path, case: str) -> None:
    rewrite, name = case.split("/")[0], case.replace("/", "_")
    path = write_problem(tmp_path, f"alg_{name}", _HEAD + PROBLEMS[case] + _TAIL)
    ref, _, model, model_new = on_gpu(path, f"alg_{name}")
    assert rewrite in path.with_name(f"{path.stem}_builtin.py").read_text()
    # plain, capture, replay; then new weights by load_state_dict, then written in place: the
    # weights the rewrite derives are prepared again (test_weight_preparation.py)
    for call in range(5):
        torch.manual_seed(50 + call)
        inputs = [t.cuda() for t in ref.get_inputs()]
        with torch.no_grad():
            if call == 3:
                for p in model.parameters():
                    p.mul_(-1.5)
                model_new.load_state_dict(model.state_dict())
            if call == 4:
                for p, q in zip(model.parameters(), model_new.parameters(), strict=True):
                    p.add_(0.25)
                    q.add_(0.25)
            want = model(*inputs)
            got = model_new(*inputs)
            exact = model.double()(*[t.double() for t in inputs])
            model.float()
        # no further from float64 than the fp32 reference, with KernelBench's fp32 tolerance
        err_ours = (got.double() - exact).abs().max().item()
        err_ref = (want.double() - exact).abs().max().item()
        assert err_ours <= max(2 * err_ref, 1e-4 * (1 + exact.abs().max().item())), (
            err_ours,
            err_ref,
        )
