"""Which GPUs the scheduler may use: one queue per device, so this decides how many queues exist.

Kept torch-free on purpose: the server must not import torch (or initialise CUDA) just to count
GPUs, so we ask `nvidia-smi -L` and honour CUDA_VISIBLE_DEVICES the way CUDA would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

_GPU_LINE = re.compile(r"^GPU (\d+):", re.MULTILINE)


def discover_gpus(device_setting: str | None = None, *, timeout_s: float = 10.0) -> list[str]:
    """Return device names (`cuda:K`) the worker processes can use; an empty list means none.

    `device_setting` (Settings.device) pins one device. Otherwise every GPU that `nvidia-smi -L`
    lists, narrowed by CUDA_VISIBLE_DEVICES, since workers inherit that variable and renumber.
    """
    if device_setting:
        return [device_setting.strip()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in {"", "-1"}:
        return []
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    count = len(_GPU_LINE.findall(out.stdout))
    if visible is not None:
        # Workers see the visible devices renumbered from 0.
        count = min(count, len([v for v in visible.split(",") if v.strip()]))
    return [f"cuda:{i}" for i in range(count)]


def no_gpu_message() -> str:
    """The one sentence users see when a GPU job cannot run here."""
    if shutil.which("nvidia-smi") is None:
        return "No CUDA GPU on this machine (nvidia-smi not found); this job needs one."
    return "No CUDA GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them)."
