"""Turn a `ProfileReport` into `Finding`s on the user's lines: the shared diagnostic shape.

Severity from ncu's rule type: 1 info -> information, 3 warning -> warning, 4 error -> error.
Type 2 (optimization) becomes a warning only when ncu estimates it can save at least
`OPTIMIZATION_WARNING_PCT` of the kernel's time, and information otherwise: a yellow squiggle
should mean "fixing this pays", and ncu emits optimization advice for nearly every kernel, so
warning on all of it would make a healthy kernel look broken and teach users to ignore it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.profile import ProfileReport, ProfileResult
from stitch_lsp.profile.mapping import FileMapping, SourceMapper

OPTIMIZATION_WARNING_PCT = 10.0
HOTSPOT_MIN_PCT = 10.0
_GUIDE = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"
_SECTION_ANCHORS = {
    "SpeedOfLight": "sections-and-rules",
    "SpeedOfLight_RooflineChart": "roofline",
    "Occupancy": "metrics-hw-model",
    "LaunchStats": "metrics-hw-model",
    "MemoryWorkloadAnalysis": "memory-workload-analysis",
    "MemoryWorkloadAnalysis_Chart": "memory-workload-analysis",
    "MemoryWorkloadAnalysis_Tables": "memory-workload-analysis",
    "WarpStateStats": "metrics-reference",
    "SchedulerStats": "metrics-reference",
    "SourceCounters": "statistical-sampler",
    "InstructionStats": "metrics-decoder",
    "ComputeWorkloadAnalysis": "metrics-hw-model",
}
# ncu marks links and section references as @url:label:target@ and @section:id:label@.
_URL_REF = re.compile(r"@url:([^:@]+):([^@]+)@")
_SECTION_REF = re.compile(r"@section:[^:@]+:([^@]+)@")
_SOURCE_REF = re.compile(r"@source:[^@]*:([^@:]+)@")


def section_url(section: str) -> str:
    return f"{_GUIDE}#{_SECTION_ANCHORS.get(section, 'sections-and-rules')}"


def clean_message(text: str) -> str:
    """ncu's inline markup to plain text: `@url:label:href@` -> `label (href)`."""
    text = _URL_REF.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    text = _SECTION_REF.sub(lambda m: f"'{m.group(1)}'", text)
    return _SOURCE_REF.sub(lambda m: m.group(1), text)


def severity_for(rule_type: int, speedup_pct: float | None) -> Severity:
    if rule_type >= 4:
        return Severity.error
    if rule_type == 3:
        return Severity.warning
    if rule_type == 2 and speedup_pct is not None and speedup_pct >= OPTIMIZATION_WARNING_PCT:
        return Severity.warning
    return Severity.information


@dataclass
class KernelPlace:
    """Where a profiled kernel's signature sits in a local file."""

    path: Path
    line: int
    mapping: FileMapping | None


_SIG = r"__global__[^;{{]*?\b{name}\s*\("


def find_signature(text: str, name: str) -> int | None:
    """1-based line of `__global__ ... name(` in a text (CUDA file or Python with CUDA strings)."""
    m = re.search(_SIG.format(name=re.escape(name)), text, flags=re.S)
    if m is None:
        return None
    name_at = m.end() - 1
    return text.count("\n", 0, name_at) + 1


def module_anchor(path: Path, text: str, class_name: str | None = None) -> KernelPlace | None:
    """The `def forward` of the profiled module (else its class line), for kernels that have no
    source of their own in the workspace (cuBLAS, cuDNN, torch's kernels)."""
    if path.suffix != ".py":
        return None
    name = class_name or ("ModelNew" if re.search(r"^class\s+ModelNew\b", text, re.M) else "Model")
    cls = re.search(rf"^class\s+{re.escape(name)}\b", text, re.M)
    if cls is None:
        return None
    body = text[cls.end() :]
    first_nl = body.find("\n") + 1
    if first_nl and (nxt := re.search(r"^\S", body[first_nl:], re.M)) is not None:
        body = body[: first_nl + nxt.start()]  # stop at the next top-level statement
    fwd = re.search(r"^[ \t]+def\s+forward\s*\(", body, re.M)
    at = cls.end() + fwd.start() if fwd else cls.start()
    return KernelPlace(path, text.count("\n", 0, at) + 1, None)


def place_kernel(
    k: ProfileResult, mapper: SourceMapper, fallback: KernelPlace | None = None
) -> KernelPlace | None:
    mapping = mapper.resolve(k.source_path)
    if mapping is None:
        # No line info (built without -lineinfo) or no such file: find the kernel by name.
        files = [mapper.preferred] if mapper.preferred else []
        for cand in [*files, *mapper.candidates]:
            line = find_signature(mapper.text_of(cand) or "", k.name)
            if line is not None:
                return KernelPlace(cand, line, None)
        return fallback
    text = mapper.text_of(mapping.local_path) or ""
    sig = find_signature(text, k.name)
    if sig is None and k.source_first_line:
        sig = mapping.line(k.source_first_line)
    return KernelPlace(mapping.local_path, sig or 1, mapping)


def _speedups(k: ProfileResult) -> dict[str, float]:
    best: dict[str, float] = {}
    for r in k.rules:
        if r.speedup_pct is not None:
            best[r.rule_id] = max(best.get(r.rule_id, 0.0), r.speedup_pct)
    return best


def _suffix(speedup: float | None) -> str:
    return f" (est. speedup {speedup:.0f}%)" if speedup else ""


def kernel_findings(
    k: ProfileResult, mapper: SourceMapper, fallback: KernelPlace | None = None
) -> list[Finding]:
    """Rule results on the kernel's signature, markers and hot spots on their own lines."""
    out: list[Finding] = []
    place = place_kernel(k, mapper, fallback)
    speedups = _speedups(k)
    if place is not None:
        for r in k.rules:
            title = f"{r.title}: " if r.title else ""
            out.append(
                Finding(
                    path=str(place.path),
                    line=place.line,
                    severity=severity_for(r.type, r.speedup_pct),
                    code=r.rule_id,
                    message=f"{k.name}: {title}{clean_message(r.message)}{_suffix(r.speedup_pct)}",
                    source="ncu",
                    url=section_url(r.section),
                )
            )
    # One diagnostic per (rule, line): ncu often marks a line and its SASS addresses alike.
    merged: dict[tuple[str, str, int], tuple[list[str], int, str]] = {}
    for mk in k.markers:
        mapping = mapper.resolve(mk.path)
        if mapping is None or mk.line is None:
            continue
        key = (mk.rule_id, str(mapping.local_path), mapping.line(mk.line))
        msgs, typ, section = merged.get(key, ([], 0, mk.section))
        text = clean_message(mk.message)
        if text not in msgs:
            msgs.append(text)
        merged[key] = (msgs, max(typ, mk.type), section)
    for (rule_id, path, line), (msgs, typ, section) in merged.items():
        speedup = speedups.get(rule_id)
        out.append(
            Finding(
                path=path,
                line=line,
                severity=severity_for(typ, speedup),
                code=rule_id,
                message=f"{k.name}: " + " ".join(msgs) + _suffix(speedup),
                source="ncu",
                url=section_url(section),
            )
        )
    for h in k.hotspots:
        if h.stall_pct < HOTSPOT_MIN_PCT and not h.excessive_sectors:
            continue
        mapping = mapper.resolve(h.path)
        if mapping is None:
            continue
        parts = []
        if h.stall_pct >= HOTSPOT_MIN_PCT:
            why = f", mostly {h.top_stall}" if h.top_stall else ""
            parts.append(f"{h.stall_pct:.0f}% of the kernel's warp stall samples{why}")
        if h.excessive_sectors:
            parts.append(
                f"{h.excessive_sectors:,.0f} excessive global-memory sectors (uncoalesced)"
            )
        if h.excessive_shared_wavefronts:
            parts.append(f"{h.excessive_shared_wavefronts:,.0f} excessive shared wavefronts")
        out.append(
            Finding(
                path=str(mapping.local_path),
                line=mapping.line(h.line),
                severity=Severity.information,
                code="SourceCounters",
                message=f"{k.name}: hot spot: " + "; ".join(parts),
                source="ncu",
                url=section_url("SourceCounters"),
            )
        )
    return out


def representatives(kernels: list[ProfileResult]) -> list[ProfileResult]:
    """One launch per distinct kernel (the longest): a kernel launched in a loop would
    otherwise repeat every finding once per launch on the same lines."""
    best: dict[str, ProfileResult] = {}
    for k in kernels:
        key = k.mangled or k.demangled or k.name
        if key not in best or (k.duration_ns or 0.0) > (best[key].duration_ns or 0.0):
            best[key] = k
    return [k for k in kernels if best.get(k.mangled or k.demangled or k.name) is k]


def report_findings(
    report: ProfileReport, mapper: SourceMapper, fallback: KernelPlace | None = None
) -> list[Finding]:
    """All findings of a report; `fallback` places kernels that have no source of their own."""
    findings: list[Finding] = []
    for k in representatives(report.kernels):
        findings.extend(kernel_findings(k, mapper, fallback))
    order = {Severity.error: 0, Severity.warning: 1, Severity.information: 2, Severity.hint: 3}
    findings.sort(key=lambda f: (f.path, f.line, order[f.severity], f.code))
    return findings


def unmapped_paths(report: ProfileReport, mapper: SourceMapper) -> list[str]:
    """Report source paths that no local file was found for (to tell the user about --map)."""
    paths = {k.source_path for k in report.kernels if k.source_path}
    paths |= {m.path for k in report.kernels for m in k.markers if m.path}
    return sorted(p for p in paths if p and mapper.resolve(p) is None)
