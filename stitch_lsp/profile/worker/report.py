"""Read an `.ncu-rep` file with NVIDIA's `ncu_report` module into `ProfileReport` records.

Everything here reads the report's own data (metrics, rule results, source markers and the
per-instruction SourceCounters), never ncu's printed text, so it works for any section set.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

from stitch_lsp.models.profile import (
    Bottleneck,
    LaunchConfig,
    LineHotspot,
    Occupancy,
    ProfileReport,
    ProfileResult,
    Roofline,
    RuleResult,
    SourceMarker,
    StallReason,
)

# Rule tables refer to lines as `@source:FILE:ZERO_BASED_LINE:label@`.
_TABLE_SOURCE = re.compile(r"@source:([^:@]+):(\d+):")
_STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
_EXCESSIVE_GLOBAL = "derived__memory_l2_theoretical_sectors_global_excessive"
_EXCESSIVE_SHARED = "derived__memory_l1_wavefronts_shared_excessive"
_OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}
# Below this share of peak on both compute and memory, the kernel waits rather than works.
_BUSY_PCT = 60.0


class ReportError(RuntimeError):
    """The file is missing or is not a report ncu_report can read."""


NO_READER = (
    "reading Nsight Compute reports needs NVIDIA's ncu_report module: install it with "
    "`pip install 'stitch-lsp[profile]'` (x86_64 wheels), or install Nsight Compute, whose "
    "extras/python folder holds it (found through ncu on PATH or stitch.ncuPath)"
)
_NCU_FOLDERS = ("/opt/nvidia/nsight-compute/*", "/usr/local/cuda*/nsight-compute*")


def ncu_report_module(ncu_path: str | None = None) -> ModuleType:
    """NVIDIA's report reader: the `ncu-report` wheel (the `profile` extra), else the copy in
    Nsight Compute's own `extras/python` folder (aarch64 hosts have no wheel)."""
    try:
        import ncu_report
    except ImportError:
        pass
    else:
        return ncu_report
    for folder in _reader_folders(ncu_path or os.environ.get("STITCH_NCU_PATH") or "ncu"):
        if (folder / "ncu_report.py").is_file():
            sys.path.append(str(folder))
            try:
                import ncu_report
            except ImportError:
                sys.path.remove(str(folder))
                continue
            return ncu_report
    raise ReportError(NO_READER)


def _reader_folders(ncu_path: str) -> list[Path]:
    """Where an Nsight Compute install keeps ncu_report: beside the ncu we would run, then the
    usual install folders, newest first.

    `ncu_path` must be the user's own (a user-level setting, the server's environment or a
    flag; workspace values never get here, see config.USER_LEVEL_ONLY), and only an absolute
    one is followed: a relative path, or a relative PATH entry such as `.`, would resolve
    against the working folder, which may be a project's, and the module found there would be
    imported."""
    from stitch_lsp.profile.worker.measure import find_ncu

    folders: list[Path] = []
    ncu = find_ncu(ncu_path)
    if ncu is not None and os.path.isabs(ncu):
        exe = Path(ncu).resolve()
        folders += [exe.parent / "extras" / "python", exe.parent.parent / "extras" / "python"]
    for pattern in _NCU_FOLDERS:
        folders += [Path(p) / "extras" / "python" for p in sorted(glob.glob(pattern), reverse=True)]
    return folders


def load_report(path: str | Path, ncu_path: str | None = None) -> ProfileReport:
    """The report at `path`; `ncu_path` helps find ncu_report when its wheel is missing."""
    ncu_report = ncu_report_module(ncu_path)

    path = Path(path)
    if not path.is_file():
        raise ReportError(f"no such report: {path}")
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as exc:  # the native loader raises plain exceptions
        raise ReportError(f"cannot read {path} as an Nsight Compute report: {exc}") from exc
    if ctx is None:
        raise ReportError(f"cannot read {path} as an Nsight Compute report")
    if ctx.num_ranges() == 0:
        # ncu_report opens any file; a non-report simply has no ranges.
        raise ReportError(f"{path} holds no profiled kernels (is it an Nsight Compute report?)")
    report = ProfileReport(report_path=str(path))
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            try:
                action = rng.action_by_idx(a)
                for name, text in _source_files(action).items():
                    report.sources.setdefault(name, text)
                report.kernels.append(read_action(action, r, a))
            except Exception as exc:  # the native reader gives a damaged file's gaps as None
                raise ReportError(
                    f"{path} is damaged or truncated: kernel {a + 1} of range {r + 1} cannot be "
                    f"read ({_first_line(exc)}); copy the report again or re-run ncu"
                ) from exc
    return report


def _first_line(exc: BaseException) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        fields = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
        return f"no valid value for {', '.join(fields) or 'its fields'}"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:120]}" if lines else type(exc).__name__


def _source_files(action: Any) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in dict(action.source_files()).items()}
    except Exception:
        return {}


class _Metrics:
    """Small accessor over one action's metrics that returns None for what was not collected."""

    def __init__(self, action: Any) -> None:
        self.action = action
        self.names = set(action.metric_names())

    def get(self, name: str) -> float | None:
        if name not in self.names:
            return None
        m = self.action.metric_by_name(name)
        if m is None or not m.has_value():
            return None
        try:
            return float(m.as_double())
        except (TypeError, ValueError):
            return None

    def first(self, *names: str) -> float | None:
        """The first of several equivalent metrics that was collected (sets differ)."""
        return next((v for n in names if (v := self.get(n)) is not None), None)

    def total(self, *names: str) -> float | None:
        """Sum of metrics that are all present, else None."""
        values = [v for n in names if (v := self.get(n)) is not None]
        return sum(values) if len(values) == len(names) else None

    def text(self, name: str) -> str | None:
        if name not in self.names:
            return None
        m = self.action.metric_by_name(name)
        return None if m is None else m.as_string()

    def function_pc(self) -> int | None:
        """The kernel's entry address (the value of launch__function_pcs)."""
        if "launch__function_pcs" not in self.names:
            return None
        m = self.action.metric_by_name("launch__function_pcs")
        if m is None or m.num_instances() == 0:
            return None
        return int(m.as_uint64(0)) or None

    def per_pc(self, name: str) -> list[tuple[int, float]]:
        if name not in self.names:
            return []
        m = self.action.metric_by_name(name)
        if m is None or not m.has_correlation_ids() or m.num_instances() == 0:
            return []
        ids = m.correlation_ids()
        return [(int(ids.as_uint64(i)), float(m.as_double(i))) for i in range(m.num_instances())]


def read_action(action: Any, range_idx: int = 0, action_idx: int = 0) -> ProfileResult:
    ncu_report = ncu_report_module()
    m = _Metrics(action)
    demangled = action.name(ncu_report.IAction.NameBase_DEMANGLED)
    result = ProfileResult(
        name=action.name(),
        demangled=demangled,
        mangled=action.name(ncu_report.IAction.NameBase_MANGLED),
        range_idx=range_idx,
        action_idx=action_idx,
        device=m.text("device__attribute_display_name"),
        duration_ns=m.get("gpu__time_duration.sum"),
        sm_throughput_pct=m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        memory_throughput_pct=m.get(
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
        ),
        dram_throughput_pct=m.first(
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        dram_bytes_per_s=m.get("dram__bytes.sum.per_second")
        or m.total("dram__bytes_read.sum.per_second", "dram__bytes_write.sum.per_second"),
        occupancy=_occupancy(m),
        launch=_launch(m),
    )
    result.stalls = _stalls(m)
    result.roofline = _roofline(m)
    result.bottleneck, result.bottleneck_reason = classify(result)
    result.rules = _rules(action)
    result.markers = _markers(action)
    result.hotspots = _hotspots(action, m)
    pc = m.function_pc()
    if pc is not None:
        result.source_path, result.source_first_line = _source_line(action, pc)
    if result.source_path is None:
        # No line info for the entry: take the file the hottest lines or markers name.
        named = [h.path for h in result.hotspots] + [mk.path for mk in result.markers if mk.path]
        result.source_path = named[0] if named else None
    return result


def _occupancy(m: _Metrics) -> Occupancy:
    limits = {k: v for k, name in _OCCUPANCY_LIMITS.items() if (v := m.get(name)) is not None}
    limiter = None
    if limits:
        least = min(limits.values())
        # Several limits can tie; name them all, the tightest first in a fixed order.
        limiter = ", ".join(k for k, v in limits.items() if v == least)
    return Occupancy(
        theoretical_pct=m.get("sm__maximum_warps_per_active_cycle_pct"),
        achieved_pct=m.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        limiter=limiter,
        block_limits=limits,
    )


def _int(value: float | None) -> int:
    return int(value) if value is not None else 0


def _launch(m: _Metrics) -> LaunchConfig:
    def opt(name: str) -> int | None:
        v = m.get(name)
        return None if v is None else int(v)

    return LaunchConfig(
        block=tuple(_int(m.get(f"launch__block_dim_{d}")) for d in "xyz"),
        grid=tuple(_int(m.get(f"launch__grid_dim_{d}")) for d in "xyz"),
        block_size=_int(m.get("launch__block_size")),
        grid_size=_int(m.get("launch__grid_size")),
        registers_per_thread=opt("launch__registers_per_thread"),
        shared_mem_static=opt("launch__shared_mem_per_block_static"),
        shared_mem_dynamic=opt("launch__shared_mem_per_block_dynamic"),
        waves_per_sm=m.get("launch__waves_per_multiprocessor"),
        sm_count=opt("launch__sm_count") or opt("device__attribute_multiprocessor_count"),
    )


def _stall_reason_names(m: _Metrics) -> list[str]:
    return sorted(
        n[len(_STALL_PREFIX) :]
        for n in m.names
        if n.startswith(_STALL_PREFIX) and not n.endswith("_not_issued")
    )


def _stalls(m: _Metrics) -> list[StallReason]:
    """Warp-state samples by reason; 'selected' is the warp issuing, so it is not a stall."""
    samples: dict[str, float] = {}
    for reason in _stall_reason_names(m):
        if reason == "selected":
            continue
        v = m.get(_STALL_PREFIX + reason)
        if v:
            samples[reason] = v
    if not samples:
        # No SourceCounters: fall back to WarpStateStats' cycles per issued instruction.
        prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
        for n in m.names:
            if n.startswith(prefix) and n.endswith(suffix):
                reason = n[len(prefix) : -len(suffix)]
                if reason != "selected" and (v := m.get(n)):
                    samples[reason] = v
    total = sum(samples.values())
    stalls = [
        StallReason(name=k, samples=v, pct=100.0 * v / total if total else 0.0)
        for k, v in samples.items()
    ]
    return sorted(stalls, key=lambda s: -s.samples)


def _roofline(m: _Metrics) -> Roofline | None:
    """FP32+FP64 FLOP/s against DRAM bytes, from the metrics SpeedOfLight's roofline collects."""
    cycles_per_s = m.get("smsp__cycles_elapsed.avg.per_second")
    dram_bps = m.get("dram__bytes.sum.per_second")
    dram_peak = m.get("dram__bytes.sum.peak_sustained")
    dram_hz = m.get("dram__cycles_elapsed.avg.per_second")
    ffma_peak = m.get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
    sm_hz = m.get("sm__cycles_elapsed.avg.per_second")
    if (
        cycles_per_s is None
        or dram_bps is None
        or dram_peak is None
        or dram_hz is None
        or ffma_peak is None
        or sm_hz is None
    ):
        return None
    per_cycle = 0.0
    found = False
    for prec in ("f", "d"):
        ops = {}
        for op in ("add", "mul", "fma"):
            name = f"smsp__sass_thread_inst_executed_op_{prec}{op}_pred_on.sum.per_cycle_elapsed"
            ops[op] = m.get(name)
        if any(v is not None for v in ops.values()):
            found = True
            per_cycle += (ops["add"] or 0.0) + (ops["mul"] or 0.0) + 2.0 * (ops["fma"] or 0.0)
    if not found:
        return None
    achieved = per_cycle * cycles_per_s
    peak = 2.0 * ffma_peak * sm_hz
    peak_bw = dram_peak * dram_hz
    ai = achieved / dram_bps if dram_bps else None
    ridge = peak / peak_bw if peak_bw else None
    bound = "memory" if ai is None or ridge is None or ai < ridge else "compute"
    roof = None
    if ai is not None and ridge is not None:
        roof = min(peak, ai * peak_bw)
    return Roofline(
        achieved_flops=achieved,
        peak_flops=peak,
        dram_bytes_per_s=dram_bps,
        peak_dram_bytes_per_s=peak_bw,
        arithmetic_intensity=ai,
        ridge_point=ridge,
        bound=bound,
        pct_of_roof=100.0 * achieved / roof if roof else None,
    )


def classify(k: ProfileResult) -> tuple[Bottleneck, str]:
    """One bottleneck class, by the rules the ncu SOLBottleneck rule and the launch stats imply."""
    launch = k.launch
    sm_count = launch.sm_count or 0
    if launch.grid_size and sm_count and launch.grid_size < sm_count:
        return Bottleneck.launch, f"grid of {launch.grid_size} blocks on {sm_count} SMs"
    if launch.waves_per_sm is not None and launch.waves_per_sm < 0.5:
        return Bottleneck.launch, f"{launch.waves_per_sm:.2f} waves: the GPU is mostly idle"
    if k.duration_ns is not None and k.duration_ns < 5_000 and launch.grid_size:
        return Bottleneck.launch, f"{k.duration_ns / 1000:.1f} µs: launch overhead dominates"
    sm, mem = k.sm_throughput_pct, k.memory_throughput_pct
    if sm is None or mem is None:
        return Bottleneck.unknown, "SpeedOfLight was not collected"
    if max(sm, mem) < _BUSY_PCT:
        top = k.stalls[0].name if k.stalls else None
        why = f"compute {sm:.0f}% and memory {mem:.0f}% of peak"
        return Bottleneck.latency, why + (f"; warps mostly stall on {top}" if top else "")
    if mem >= sm:
        return Bottleneck.memory, f"memory at {mem:.0f}% of peak (compute {sm:.0f}%)"
    return Bottleneck.compute, f"compute at {sm:.0f}% of peak (memory {mem:.0f}%)"


def _rules(action: Any) -> list[RuleResult]:
    rules: list[RuleResult] = []
    for d in action.rule_results_as_dicts():
        msg = d.get("rule_message") or {}
        text = str(msg.get("message") or "").strip()
        if not text:
            continue
        speed = d.get("speedup_estimation") or {}
        stype = {1: "local", 2: "global"}.get(int(speed.get("type", 0) or 0))
        locations: list[tuple[str, int]] = []
        for table in d.get("result_tables") or []:
            for column in table.get("data") or []:
                for cell in column:
                    for f, line in _TABLE_SOURCE.findall(str(cell)):
                        if (f, int(line) + 1) not in locations:
                            locations.append((f, int(line) + 1))
        rules.append(
            RuleResult(
                rule_id=str(d.get("rule_identifier", "")),
                name=str(d.get("name", "")),
                section=str(d.get("section_identifier", "")),
                title=str(msg.get("title") or ""),
                message=text,
                type=int(msg.get("type", 1) or 1),
                speedup_pct=float(speed["speedup"]) if "speedup" in speed else None,
                speedup_type=stype,
                locations=locations,
            )
        )
    return rules


def _source_line(action: Any, pc: int) -> tuple[str | None, int | None]:
    try:
        info = action.source_info(pc)
    except Exception:
        return None, None
    if info is None:
        return None, None
    name, line = info.file_name(), int(info.line())
    return (str(name), line) if name and line > 0 else (None, None)


def _markers(action: Any) -> list[SourceMarker]:
    markers: list[SourceMarker] = []
    for d in action.source_markers():
        common = {
            "rule_id": str(d.get("rule_identifier", "")),
            "section": str(d.get("section_identifier", "")),
            "message": str(d.get("message", "")).strip(),
            "type": int(d.get("message_type", 1) or 1),
        }
        if int(d.get("kind", 0)) == 1:
            loc = d.get("source_location") or {}
            markers.append(
                SourceMarker(**common, path=loc.get("file_name"), line=loc.get("line") or None)
            )
        else:
            pc = int(d.get("source_address", 0) or 0)
            path, line = _source_line(action, pc)
            markers.append(SourceMarker(**common, path=path, line=line, address=pc))
    return markers


def _hotspots(action: Any, m: _Metrics) -> list[LineHotspot]:
    """Sum per-instruction counters onto source lines."""
    line_of: dict[int, tuple[str | None, int | None]] = {}

    def where(pc: int) -> tuple[str | None, int | None]:
        if pc not in line_of:
            line_of[pc] = _source_line(action, pc)
        return line_of[pc]

    stalls: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    excessive: dict[tuple[str, int], float] = defaultdict(float)
    shared: dict[tuple[str, int], float] = defaultdict(float)
    total = 0.0
    for reason in _stall_reason_names(m):
        if reason == "selected":
            continue
        for pc, v in m.per_pc(_STALL_PREFIX + reason):
            path, line = where(pc)
            if v and path and line:
                stalls[(path, line)][reason] += v
                total += v
    for name, into in ((_EXCESSIVE_GLOBAL, excessive), (_EXCESSIVE_SHARED, shared)):
        for pc, v in m.per_pc(name):
            path, line = where(pc)
            if v and path and line:
                into[(path, line)] += v
    spots: list[LineHotspot] = []
    for key in set(stalls) | set(excessive) | set(shared):
        reasons = stalls.get(key, {})
        samples = sum(reasons.values())
        spots.append(
            LineHotspot(
                path=key[0],
                line=key[1],
                stall_samples=samples,
                stall_pct=100.0 * samples / total if total else 0.0,
                top_stall=max(reasons, key=reasons.__getitem__) if reasons else None,
                excessive_sectors=excessive.get(key, 0.0),
                excessive_shared_wavefronts=shared.get(key, 0.0),
            )
        )
    return sorted(
        spots,
        key=lambda s: (-s.stall_samples, -s.excessive_sectors, -s.excessive_shared_wavefronts),
    )
