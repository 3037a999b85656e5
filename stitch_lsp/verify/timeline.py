"""A forward's system-level timeline, summarised from device activity records. No torch here.

The worker records each profiled forward between two marker kernels on the current stream
(`activity.record`): sync, marker, forward, marker, sync. The records come from CUPTI through
torch.profiler, so they hold this process's work only, whoever else shares the GPU. From them:
how many kernels a forward launches, how busy the GPU is between the markers, the idle gaps
(launch overhead, host work), and where the GPU time goes. The same records tell whether any of
the forward's work was still running after the current stream had finished (side streams).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from stitch_lsp.models.verify import KernelShare, Timeline

MARKER_KERNEL = "spin_kernel"  # torch.cuda._sleep's kernel: the delimiters of one forward
GAP_NS = 1_000  # idle stretches shorter than 1 us are the hardware's, not the program's
TOP_KERNELS = 5


@dataclass(frozen=True)
class Activity:
    """One GPU operation of this process."""

    name: str
    stream: int
    start_ns: int
    end_ns: int
    kind: str = "kernel"  # kernel | memcpy | memset

    @property
    def is_marker(self) -> bool:
        return self.kind == "kernel" and MARKER_KERNEL in self.name


@dataclass
class Call:
    """One forward: its work, and the window between its markers."""

    start_ns: int  # the end of the opening marker
    end_ns: int  # the start of the closing marker
    stream: int  # the current stream, where the markers ran
    work: list[Activity] = field(default_factory=list)


class RecordingError(ValueError):
    """The records cannot be split into forwards (markers missing or forged)."""


def split_calls(activities: Sequence[Activity], calls: int) -> list[Call]:
    """Group activities by forward, using the two markers each forward is wrapped in."""
    markers = sorted((a for a in activities if a.is_marker), key=lambda a: a.start_ns)
    if len(markers) != 2 * calls:
        raise RecordingError(
            f"expected {2 * calls} marker kernels, found {len(markers)} "
            "(no device activity recorded, or the code under test launches the marker kernel)"
        )
    streams = {m.stream for m in markers}
    if len(streams) != 1:
        raise RecordingError("the marker kernels ran on more than one stream")
    stream = streams.pop()
    out = [
        Call(start_ns=markers[2 * i].end_ns, end_ns=markers[2 * i + 1].start_ns, stream=stream)
        for i in range(calls)
    ]
    bounds = [markers[2 * i].start_ns for i in range(calls)] + [1 << 62]
    for a in activities:
        if a.is_marker:
            continue
        for i in range(calls):
            if bounds[i] <= a.start_ns < bounds[i + 1]:
                out[i].work.append(a)
                break
    return out


def busy_intervals(work: Sequence[Activity]) -> list[tuple[int, int]]:
    """The union of the activities' intervals, as sorted disjoint intervals."""
    merged: list[tuple[int, int]] = []
    for a in sorted(work, key=lambda a: a.start_ns):
        if merged and a.start_ns <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], a.end_ns))
        else:
            merged.append((a.start_ns, a.end_ns))
    return merged


def gaps(call: Call) -> list[int]:
    """Idle stretches (ns) inside the call's window, longer than GAP_NS."""
    out: list[int] = []
    cursor = call.start_ns
    for s, e in busy_intervals(call.work):
        if s - cursor > GAP_NS:
            out.append(s - cursor)
        cursor = max(cursor, e)
    if call.end_ns - cursor > GAP_NS:
        out.append(call.end_ns - cursor)
    return out


def overrun_ns(call: Call) -> int:
    """How long the forward's work kept running after its stream's closing marker began.

    Work joined back into the current stream always ends before that marker can start; work
    left on another stream can end later.
    """
    last = max((a.end_ns for a in call.work), default=call.end_ns)
    return max(0, last - call.end_ns)


def summarise(calls: Sequence[Call], host_ms: float | None = None) -> Timeline:
    """Per-forward averages over the recorded calls."""
    n = len(calls)
    if n == 0:
        raise RecordingError("no forwards recorded")
    kernels = [a for c in calls for a in c.work if a.kind == "kernel"]
    copies = [a for c in calls for a in c.work if a.kind != "kernel"]
    # The window ends where the last work ends, when that is after the closing marker.
    window = sum(c.end_ns + overrun_ns(c) - c.start_ns for c in calls)
    busy = sum(e - s for c in calls for s, e in busy_intervals(c.work))
    all_gaps = [g for c in calls for g in gaps(c)]
    per_name: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k in kernels:
        per_name[k.name][0] += k.end_ns - k.start_ns
        per_name[k.name][1] += 1
    kernel_ns = sum(v[0] for v in per_name.values()) or 1
    top = sorted(per_name.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]
    return Timeline(
        forwards=n,
        kernels=len(kernels) / n,
        copies=len(copies) / n,
        streams=len({a.stream for c in calls for a in c.work}) or 1,
        window_ms=window / n / 1e6,
        busy_ms=busy / n / 1e6,
        busy_fraction=busy / window if window > 0 else 0.0,
        gaps=len(all_gaps) / n,
        gap_ms=sum(all_gaps) / n / 1e6,
        max_gap_ms=max(all_gaps, default=0) / 1e6,
        median_gap_ms=statistics.median(all_gaps) / 1e6 if all_gaps else 0.0,
        host_ms=host_ms,
        top=[
            KernelShare(
                name=short_name(name), ms=ns / n / 1e6, calls=count / n, share=ns / kernel_ns
            )
            for name, (ns, count) in top
        ],
    )


def short_name(name: str, limit: int = 90) -> str:
    """A kernel's name without its template arguments and parameter list, e.g.
    `void at::native::vectorized_elementwise_kernel<4, ...>(...)` -> `at::native::vectorized_
    elementwise_kernel`."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    for sep in ("<", "("):
        cut = text.find(sep)
        if cut > 0:
            text = text[:cut]
    return text.strip()[:limit] or name[:limit]


# --------------------------------------------------------------------------- text


def describe(t: Timeline) -> str:
    """One line, as the report, the hover and the prompts show it."""
    parts = [
        f"{t.kernels:g} kernel{'s' if t.kernels != 1 else ''}"
        + (f" + {t.copies:g} copies" if t.copies else ""),
        f"GPU busy {t.busy_fraction:.0%} of {t.window_ms:.3f} ms",
        f"{t.gaps:g} gaps ({t.gap_ms:.3f} ms, longest {t.max_gap_ms:.3f} ms)",
    ]
    if t.host_ms is not None:
        parts.append(f"host {t.host_ms:.3f} ms per call")
    if t.streams > 1:
        parts.append(f"{t.streams} streams")
    return ", ".join(parts)


def describe_top(t: Timeline, limit: int = 3) -> list[str]:
    return [f"{k.name}: {k.ms:.3f} ms ({k.share:.0%}, x{k.calls:g})" for k in t.top[:limit]]


def advice(t: Timeline) -> str | None:
    """What the timeline says about end-to-end time, when it says something."""
    if t.window_ms <= 0:
        return None
    if t.busy_fraction < 0.6 and t.gaps >= 2:
        return (
            f"the GPU idles {1 - t.busy_fraction:.0%} of the forward between {t.kernels:g} "
            "launches: launch and host overhead dominate (fewer kernels, or a CUDA graph)"
        )
    if t.top and t.top[0].share > 0.6:
        return f"one kernel takes {t.top[0].share:.0%} of the GPU time: {t.top[0].name}"
    return None
