"""Short text about a profiled kernel: the code lens line, the hover Markdown, the CLI table row."""

from __future__ import annotations

from stitch_lsp.models.profile import KernelSummary, ProfileResult

__all__ = ["KernelSummary", "hover_markdown", "lens_title", "summarize", "top_hints"]


def top_hints(k: ProfileResult, n: int = 3) -> list[str]:
    """The rules ncu expects to pay most, largest estimated speedup first."""
    from stitch_lsp.profile.findings import clean_message

    ranked = sorted(
        (r for r in k.rules if r.type >= 2),
        key=lambda r: (-(r.speedup_pct or 0.0), -r.type),
    )
    hints = []
    for r in ranked[:n]:
        head = r.title or r.name or r.rule_id
        gain = f" (est. {r.speedup_pct:.0f}%)" if r.speedup_pct else ""
        first = clean_message(r.message).split(". ")[0].rstrip(".")
        hints.append(f"{r.rule_id} · {head}{gain}: {first}.")
    return hints


def summarize(k: ProfileResult, path: str | None = None, line: int | None = None) -> KernelSummary:
    smem = None
    if k.launch.shared_mem_static is not None or k.launch.shared_mem_dynamic is not None:
        smem = (k.launch.shared_mem_static or 0) + (k.launch.shared_mem_dynamic or 0)
    return KernelSummary(
        name=k.name,
        path=path,
        line=line,
        duration_us=k.duration_ns / 1000 if k.duration_ns is not None else None,
        sm_throughput_pct=k.sm_throughput_pct,
        memory_throughput_pct=k.memory_throughput_pct,
        dram_gb_per_s=k.dram_bytes_per_s / 1e9 if k.dram_bytes_per_s is not None else None,
        theoretical_occupancy_pct=k.occupancy.theoretical_pct,
        achieved_occupancy_pct=k.occupancy.achieved_pct,
        occupancy_limiter=k.occupancy.limiter,
        registers_per_thread=k.launch.registers_per_thread,
        shared_mem_per_block=smem,
        block=k.launch.block,
        grid=k.launch.grid,
        waves_per_sm=k.launch.waves_per_sm,
        top_stalls=[f"{s.name} {s.pct:.0f}%" for s in k.stalls[:3]],
        bottleneck=k.bottleneck.value,
        bottleneck_reason=k.bottleneck_reason,
        roofline_bound=k.roofline.bound if k.roofline else None,
        arithmetic_intensity=k.roofline.arithmetic_intensity if k.roofline else None,
        hints=top_hints(k),
    )


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{unit}"


def lens_title(k: ProfileResult, speedup: float | None = None) -> str:
    """One line above the kernel: time, bottleneck, throughput, occupancy."""
    parts = []
    if k.duration_ns is not None:
        parts.append(f"{k.duration_ns / 1000:.1f} µs")
    if speedup is not None:
        parts.append(f"{speedup:.2f}x vs eager")
    parts.append(f"{k.bottleneck.value}-bound")
    sm, mem = _fmt(k.sm_throughput_pct, ".0f", "%"), _fmt(k.memory_throughput_pct, ".0f", "%")
    parts.append(f"SM {sm} · mem {mem}")
    if k.occupancy.achieved_pct is not None:
        parts.append(f"occupancy {k.occupancy.achieved_pct:.0f}%")
    return "ncu: " + " · ".join(parts)


def bar(pct: float | None, width: int = 20) -> str:
    if pct is None:
        return "`" + " " * width + "` n/a"
    filled = max(0, min(width, round(pct / 100 * width)))
    return "`" + "█" * filled + "░" * (width - filled) + f"` {pct:.0f}%"


def hover_markdown(k: ProfileResult, speedup: float | None = None, stale: bool = False) -> str:
    """The Markdown hover for a kernel, launch or module."""
    lines = [f"### ncu · `{k.name}`"]
    if stale:
        lines.append("_Profile of an older version of this file._")
    head = []
    if k.duration_ns is not None:
        head.append(f"**{k.duration_ns / 1000:.2f} µs**")
    if speedup is not None:
        head.append(f"**{speedup:.2f}x** vs eager (verified)")
    if k.device:
        head.append(k.device)
    if head:
        lines.append(" · ".join(head))
    lines += [
        "",
        f"Compute (SM) {bar(k.sm_throughput_pct)}  ",
        f"Memory&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp;&nbsp; {bar(k.memory_throughput_pct)}  ",
    ]
    if k.dram_bytes_per_s is not None:
        lines.append(f"DRAM {k.dram_bytes_per_s / 1e9:,.0f} GB/s  ")
    occ = k.occupancy
    if occ.theoretical_pct is not None or occ.achieved_pct is not None:
        limit = f", limited by {occ.limiter}" if occ.limiter else ""
        lines.append(
            f"Occupancy {_fmt(occ.achieved_pct, '.0f', '%')} achieved of "
            f"{_fmt(occ.theoretical_pct, '.0f', '%')} theoretical{limit}  "
        )
    launch = k.launch
    if launch.grid_size:
        regs = f", {launch.registers_per_thread} regs/thread" if launch.registers_per_thread else ""
        waves = f", {launch.waves_per_sm:.2f} waves" if launch.waves_per_sm is not None else ""
        lines.append(f"Launch grid {launch.grid} × block {launch.block}{regs}{waves}  ")
    lines.append("")
    lines.append(f"**Bottleneck: {k.bottleneck.value}** — {k.bottleneck_reason}")
    if k.roofline and k.roofline.arithmetic_intensity is not None:
        r = k.roofline
        lines.append(
            f"Roofline: {r.arithmetic_intensity:.2f} FLOP/byte ({r.bound} side of the "
            f"{_fmt(r.ridge_point, '.1f')} ridge), {_fmt(r.pct_of_roof, '.0f', '%')} of the roof"
        )
    if k.stalls:
        lines.append("Top stalls: " + ", ".join(f"{s.name} {s.pct:.0f}%" for s in k.stalls[:3]))
    hints = top_hints(k)
    if hints:
        lines.append("")
        lines.append("**Hints**")
        lines += [f"{i}. {h}" for i, h in enumerate(hints, 1)]
    return "\n".join(lines)
