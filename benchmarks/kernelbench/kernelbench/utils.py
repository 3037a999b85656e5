"""KernelBench utils, reduced to what eval.py uses here: get_gpu_vendor (copied verbatim).

The original module also imports openai, litellm, dotenv and tqdm for its inference helpers,
which the evaluation does not use; see ../VENDORED.md."""

import torch


def get_gpu_vendor(device: torch.device | int | None = None) -> str:
    """Returns 'nvidia', 'amd', or 'unknown' for the given device."""
    if not torch.cuda.is_available():
        return "unknown"
    if device is None:
        device = torch.cuda.current_device()
    name = torch.cuda.get_device_name(device).upper()
    if "NVIDIA" in name:
        return "nvidia"
    if "AMD" in name or "MI3" in name:
        return "amd"
    return "unknown"
