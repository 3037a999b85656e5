"""Which GPUs the scheduler may use: one queue per device, so this decides how many queues exist.

Kept torch-free on purpose: the server must not import torch (or initialise CUDA) just to count
GPUs, so we ask `nvidia-smi -L` and honour CUDA_VISIBLE_DEVICES the way CUDA would.
"""

from __future__ import annotations

import shutil

from stitch_lsp.verify.devices import visible_gpus


def discover_gpus(device_setting: str | None = None, *, timeout_s: float = 10.0) -> list[str]:
    """Return device names (`cuda:K`) the worker processes can use; an empty list means none.

    `device_setting` (Settings.device) pins one device. Otherwise every GPU that `nvidia-smi -L`
    lists, narrowed by CUDA_VISIBLE_DEVICES as CUDA would (the Verifier's own discovery).
    """
    if device_setting:
        return [device_setting.strip()]
    return visible_gpus(timeout_s=timeout_s)


def no_gpu_message() -> str:
    """The one sentence users see when a GPU job cannot run here."""
    if shutil.which("nvidia-smi") is None:
        return "No CUDA GPU on this machine (nvidia-smi not found); this job needs one."
    return "No CUDA GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them)."
