"""A small level-3-like problem for step-by-step runs: three Linear blocks with elementwise tails,
so the Planner makes three fusion groups (fc1+relu, fc2+tanh+mul, fc3+sigmoid)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x)) * 0.5
        return torch.sigmoid(self.fc3(x))


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return [512, 1024, 256]
