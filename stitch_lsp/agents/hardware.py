"""Peak figures of the GPUs we plan for, for the roofline floor. No torch here.

Bandwidth is what a large device-to-device copy sustains where we measured it (H200: 4.12 TB/s,
see BENCHMARKS/REFERENCE), otherwise about 90% of the datasheet figure. FP32 is the non-tensor-
core peak.
"""

from __future__ import annotations

from stitch_lsp.models.agents import HardwareSpec

# name fragment -> (compute capability, bandwidth TB/s, fp32 TFLOP/s, tf32 dense TFLOP/s, source)
_KNOWN: tuple[tuple[str, str, float, float, float, str], ...] = (
    ("H200", "9.0", 4.12, 67.0, 494.0, "measured bandwidth; datasheet FLOP/s"),
    ("H100 PCIe", "9.0", 1.80, 51.0, 378.0, "datasheet x0.9"),
    ("H100", "9.0", 3.02, 67.0, 494.0, "datasheet x0.9"),
    ("A100", "8.0", 1.75, 19.5, 156.0, "datasheet x0.9"),
    ("L40S", "8.9", 0.78, 91.6, 183.0, "datasheet x0.9"),
    ("L4", "8.9", 0.27, 30.3, 60.0, "datasheet x0.9"),
    ("RTX 4090", "8.9", 0.91, 82.6, 82.6, "datasheet x0.9"),
    ("A10", "8.6", 0.54, 31.2, 62.5, "datasheet x0.9"),
    ("T4", "7.5", 0.29, 8.1, 0.0, "datasheet x0.9"),
)
DEFAULT_TARGET = "H200"


def spec_for(name: str, *, present: bool = False, **seen: object) -> HardwareSpec:
    """The spec for a GPU name as the driver reports it, falling back to the default target."""
    for frag, cc, bw, fp32, tf32, source in _KNOWN:
        if frag.lower() in name.lower():
            return HardwareSpec(
                name=name,
                compute_capability=str(seen.get("compute_capability") or cc),
                sm_count=seen.get("sm_count"),
                memory_gib=seen.get("memory_gib"),
                bandwidth_tb_s=bw,
                fp32_tflops=fp32,
                tf32_tflops=tf32 or None,
                source=source,
                present=present,
            )
    base = spec_for(DEFAULT_TARGET)
    return base.model_copy(
        update={
            "name": name,
            "compute_capability": seen.get("compute_capability") or None,
            "sm_count": seen.get("sm_count"),
            "memory_gib": seen.get("memory_gib"),
            "source": f"unknown GPU: {DEFAULT_TARGET} figures assumed",
            "present": present,
        }
    )


def default_target() -> HardwareSpec:
    spec = spec_for(DEFAULT_TARGET)
    return spec.model_copy(
        update={"source": f"no GPU here: assumed {DEFAULT_TARGET} ({spec.source})"}
    )
