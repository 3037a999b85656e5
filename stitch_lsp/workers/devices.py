"""Which GPUs the scheduler may use: one queue per device, so this decides how many queues exist.

The server must not import torch (or initialise CUDA) just to count GPUs: the answer comes from
the one inventory (`stitch_lsp.gpus`, nvidia-smi narrowed by CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from stitch_lsp.gpus import inventory
from stitch_lsp.workers.probe import run_probe

_HAS_TORCH = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)"


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


def torch_missing(python: str | None = None, *, timeout_s: float = 20.0) -> str | None:
    """Why the workers cannot use torch (it is not installed for their Python), or None.

    A spec lookup, never an import of torch: in this process when the workers run the server's
    own Python, else in a subprocess of theirs. Every GPU job needs torch in the worker, and
    without it the honest answer is "torch is missing", not "no GPU"."""
    exe = python or sys.executable
    missing = (
        f"torch is missing: the workers' Python ({exe}) cannot import it. Install torch there, "
        "or point stitch.pythonForWorkers at a Python that has it"
    )
    if exe == sys.executable:
        return None if importlib.util.find_spec("torch") is not None else missing
    try:
        code = run_probe([exe, "-I", "-c", _HAS_TORCH], timeout_s).returncode
    except OSError as exc:
        return f"the workers' Python ({exe}) cannot be run: {exc}"
    except subprocess.TimeoutExpired:
        return f"the workers' Python ({exe}) did not answer within {timeout_s:g} s"
    if code == 0:
        return None
    if code == 3:
        return missing
    return f"the workers' Python ({exe}) failed to start (exit code {code})"
