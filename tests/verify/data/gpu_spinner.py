"""Keeps the GPU busy from another process until it is killed: an 8192^3 fp32 GEMM in a loop."""

import torch

x = torch.randn(8192, 8192, device="cuda")
y = x @ x
torch.cuda.synchronize()
print("spinning", flush=True)
while True:
    y = x @ x
    torch.cuda.synchronize()
