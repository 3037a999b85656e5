"""Which GPUs the scheduler may use: one queue per device, so this decides how many queues exist.

The server must not import torch (or initialise CUDA) just to count GPUs: the answer comes from
the one inventory (`stitch_lsp.gpus`, nvidia-smi narrowed by CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

from stitch_lsp.gpus import inventory


def discover_gpus(device_setting: str | None = None) -> list[str]:
    """Device names (`cuda:K`) the worker processes can use; an empty list means none.

    `device_setting` (Settings.device) pins one device; otherwise every GPU of the inventory.
    """
    if device_setting:
        return [device_setting.strip()]
    return inventory().devices()


def no_gpu_message() -> str:
    """The one sentence users see when a GPU job cannot run here."""
    return inventory().problem or "No CUDA GPU visible."
