"""Report -> local files -> findings: the one path from an ncu report to what users see.

`stitch-lsp profile` / `hints` print it, the editor publishes it; both call `map_report`, so a
finding lands on the same line everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stitch_lsp.models.findings import Finding
from stitch_lsp.models.profile import KernelSummary, ProfileReport, ProfileResult
from stitch_lsp.profile.findings import (
    KernelPlace,
    module_anchor,
    place_kernel,
    report_findings,
    representatives,
    unmapped_paths,
)
from stitch_lsp.profile.mapping import SourceMapper, workspace_candidates
from stitch_lsp.profile.summary import summarize


@dataclass
class PlacedKernel:
    kernel: ProfileResult
    place: KernelPlace | None
    summary: KernelSummary
    representative: bool
    """The longest launch of its kernel: the one lenses show (the others repeat it)."""


@dataclass
class MappedReport:
    report: ProfileReport
    mapper: SourceMapper
    findings: list[Finding]
    kernels: list[PlacedKernel]
    unmapped: list[str]

    def findings_by_path(self) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {}
        for f in self.findings:
            out.setdefault(str(Path(f.path).resolve()), []).append(f)
        return out


def source_mapper(
    report: ProfileReport,
    roots: Sequence[Path],
    *,
    maps: Mapping[str, str] | None = None,
    texts: Mapping[Path, str] | None = None,
    preferred: Path | None = None,
    limit: int = 2000,
) -> SourceMapper:
    """Matches the report's source paths to local files under `roots` (editor texts first)."""
    return SourceMapper(
        report.sources,
        dict(maps or {}),
        workspace_candidates(roots, limit=limit),
        dict(texts or {}),
        preferred,
    )


def map_report(
    report: ProfileReport,
    mapper: SourceMapper,
    origin: Path | None = None,
    class_name: str | None = None,
) -> MappedReport:
    """Findings and kernel places of `report`. Kernels with no source of their own (cuBLAS,
    torch's) go on the profiled module's `forward` in `origin`, when it is a .py file."""
    anchor = None
    if origin is not None and (text := mapper.text_of(origin.resolve())) is not None:
        anchor = module_anchor(origin.resolve(), text, class_name)
    shown = {id(k) for k in representatives(report.kernels)}
    kernels = []
    for k in report.kernels:
        place = place_kernel(k, mapper, anchor)
        path = str(place.path) if place else k.source_path
        summary = summarize(k, path, place.line if place else None)
        kernels.append(PlacedKernel(k, place, summary, id(k) in shown))
    return MappedReport(
        report,
        mapper,
        report_findings(report, mapper, anchor),
        kernels,
        unmapped_paths(report, mapper),
    )
