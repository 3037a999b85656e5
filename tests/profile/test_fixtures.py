"""The reports collected from the project's own examples land where the examples say they do."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.models.findings import Severity
from stitch_lsp.models.profile import Bottleneck
from stitch_lsp.profile.findings import place_kernel, report_findings
from stitch_lsp.profile.mapping import SourceMapper, workspace_candidates
from stitch_lsp.profile.worker.report import load_report

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "ncu"
EXAMPLES = REPO / "examples" / "kernels"


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def load(name: str):
    report = load_report(FIXTURES / f"{name}.ncu-rep")
    mapper = SourceMapper(report.sources, candidates=workspace_candidates([EXAMPLES]))
    return report, mapper, report_findings(report, mapper)


def codes_at(findings, path: Path, line: int) -> set[str]:
    return {f.code for f in findings if Path(f.path) == path and f.line == line}


def test_uncoalesced_store() -> None:
    report, mapper, findings = load("profile_uncoalesced")
    src = EXAMPLES / "profile_uncoalesced.cu"
    (k,) = report.kernels
    assert k.name == "transpose_naive" and k.bottleneck is Bottleneck.memory
    assert k.memory_throughput_pct is not None and k.memory_throughput_pct > 80
    assert k.dram_bytes_per_s is not None and k.dram_bytes_per_s > 1e11  # from read + write
    place = place_kernel(k, mapper)
    assert place is not None and place.path == src
    assert place.line == line_of(src, "__global__ void transpose_naive")
    store = line_of(src, "out[x * rows + y]")
    assert {"UncoalescedGlobalAccess", "CPIStall", "SourceCounters"} <= codes_at(
        findings, src, store
    )
    spot = next(h for h in k.hotspots if h.excessive_sectors)
    assert mapper.resolve(spot.path).line(spot.line) == store  # type: ignore[union-attr]
    marker = next(f for f in findings if f.code == "UncoalescedGlobalAccess" and f.line == store)
    assert marker.severity is Severity.warning  # ncu estimates a 77% speedup


def test_bank_conflicts() -> None:
    report, mapper, findings = load("profile_bank_conflicts")
    src = EXAMPLES / "profile_bank_conflicts.cu"
    (k,) = report.kernels
    sig = line_of(src, "__global__ void transpose_tiled_conflicts")
    read = line_of(src, "= tile[threadIdx.x][threadIdx.y + j]")
    assert {"SharedMemoryConflicts", "UncoalescedSharedAccess"} <= codes_at(findings, src, sig)
    assert "UncoalescedSharedAccess" in codes_at(findings, src, read)
    spot = next(h for h in k.hotspots if h.excessive_shared_wavefronts)
    assert mapper.resolve(spot.path).line(spot.line) == read  # type: ignore[union-attr]
    assert k.launch.shared_mem_static == 32 * 32 * 4


def test_register_limited() -> None:
    report, _, findings = load("profile_register_limited")
    src = EXAMPLES / "profile_register_limited.cu"
    (k,) = report.kernels
    assert k.launch.registers_per_thread == 128
    assert k.occupancy.limiter == "registers" and k.occupancy.theoretical_pct == 25.0
    assert k.occupancy.block_limits["registers"] == 2
    assert k.bottleneck is Bottleneck.compute
    sig = line_of(src, "__global__ void many_accumulators")
    assert "TheoreticalOccupancy" in codes_at(findings, src, sig)


def test_load_inline_report_maps_into_python_string() -> None:
    """The report names a build folder's cuda.cu; the findings land in the .py's string."""
    report, mapper, findings = load("profile_inline_transpose")
    src = EXAMPLES / "profile_inline_transpose.py"
    (k,) = report.kernels
    assert k.source_path is not None and k.source_path.endswith("/cuda.cu")
    mapping = mapper.resolve(k.source_path)
    assert mapping is not None and mapping.local_path == src and mapping.how == "content"
    store = line_of(src, "out[x * rows + y]")
    sig = line_of(src, "__global__ void transpose_inline")
    assert "UncoalescedGlobalAccess" in codes_at(findings, src, store)
    assert "SOLBottleneck" in codes_at(findings, src, sig)
    assert {Path(f.path) for f in findings} == {src}


@pytest.mark.parametrize(
    "name", ["profile_uncoalesced", "profile_bank_conflicts", "profile_inline_transpose"]
)
def test_every_marker_is_placed(name: str) -> None:
    report, mapper, findings = load(name)
    markers = [m for k in report.kernels for m in k.markers]
    assert markers and all(mapper.resolve(m.path) is not None for m in markers)
    marker_lines = {(m.rule_id, mapper.resolve(m.path).line(m.line)) for m in markers}  # type: ignore[union-attr]
    assert marker_lines <= {(f.code, f.line) for f in findings}
