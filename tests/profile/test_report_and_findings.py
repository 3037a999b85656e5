"""Reading a real report and turning it into findings, hovers and the CLI output (no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stitch_lsp.models.findings import Severity
from stitch_lsp.models.profile import Bottleneck, LaunchConfig, ProfileResult
from stitch_lsp.profile.findings import (
    clean_message,
    find_signature,
    report_findings,
    section_url,
    severity_for,
)
from stitch_lsp.profile.mapping import SourceMapper, align, python_string_offset
from stitch_lsp.profile.summary import hover_markdown, lens_title, summarize, top_hints
from stitch_lsp.profile.worker.report import ReportError, classify, load_report

REPO = Path(__file__).resolve().parents[2]
CUDA = """
#include <torch/extension.h>
__global__ void relu_bias(const float* x, const float* b, float* y, int n, int c){
  int i = blockIdx.x*blockDim.x+threadIdx.x;
  if(i<n){ float v = x[i] + b[i % c]; y[i] = v>0.f? v:0.f; }
}
torch::Tensor fused(torch::Tensor x, torch::Tensor b){
  auto y = torch::empty_like(x); int n = x.numel(); int c = b.numel();
  relu_bias<<<(n+255)/256,256>>>(
    x.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n, c);
  return y;
}
"""


@pytest.fixture(scope="module")
def report(ncu_fixture_dir: Path):
    return load_report(ncu_fixture_dir / "relu_bias_full.ncu-rep")


def test_kernel_metrics(report) -> None:
    (k,) = report.kernels
    assert k.name == "relu_bias" and k.mangled == "_Z9relu_biasPKfS0_Pfii"
    assert k.device == "NVIDIA H200"
    assert k.duration_ns == pytest.approx(56256.0)
    assert k.sm_throughput_pct == pytest.approx(50.58, abs=0.01)
    assert k.memory_throughput_pct == pytest.approx(42.83, abs=0.01)
    assert k.dram_bytes_per_s == pytest.approx(2.059e12, rel=1e-3)
    assert k.occupancy.theoretical_pct == 100.0
    assert k.occupancy.achieved_pct == pytest.approx(74.61, abs=0.01)
    assert k.occupancy.limiter == "warps"  # 8 blocks of 256 threads fill 64 warps
    assert k.launch.block == (256, 1, 1) and k.launch.grid == (65536, 1, 1)
    assert k.launch.registers_per_thread == 16 and k.launch.sm_count == 132
    assert k.launch.waves_per_sm == pytest.approx(62.06, abs=0.01)
    assert [s.name for s in k.stalls[:3]] == ["long_scoreboard", "short_scoreboard", "wait"]
    assert sum(s.pct for s in k.stalls) == pytest.approx(100.0)
    assert k.bottleneck is Bottleneck.latency
    assert k.roofline is not None and k.roofline.bound == "memory"
    assert k.roofline.arithmetic_intensity == pytest.approx(0.145, abs=0.001)
    assert k.source_path and k.source_path.endswith("probe_ext/cuda.cu")
    assert k.source_first_line == 6


def test_rules_markers_hotspots(report) -> None:
    (k,) = report.kernels
    assert len(k.rules) == 9
    fp = next(r for r in k.rules if r.rule_id == "FPInstructions")
    assert fp.type == 2 and fp.speedup_pct == pytest.approx(7.67, abs=0.01)
    assert fp.locations == [("cuda.cu", 8)]  # the table's zero-based 7 is line 8
    assert {(m.rule_id, m.line) for m in k.markers} == {("CPIStall", 8), ("FPInstructions", 8)}
    sass = [m for m in k.markers if m.address is not None]
    assert len(sass) == 1 and sass[0].line == 8  # a SASS marker resolved through source_info
    top = k.hotspots[0]
    assert top.line == 8 and top.top_stall == "long_scoreboard" and top.stall_pct > 80
    assert len(report.sources) == 1
    assert next(iter(report.sources.values())).startswith("#include <torch/types.h>")


def test_bad_report(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such report"):
        load_report(tmp_path / "missing.ncu-rep")
    junk = tmp_path / "junk.ncu-rep"
    junk.write_bytes(b"not a report")
    with pytest.raises(ReportError):
        load_report(junk)


def test_severity_policy() -> None:
    assert severity_for(1, None) is Severity.information
    assert severity_for(2, None) is Severity.information
    assert severity_for(2, 9.9) is Severity.information
    assert severity_for(2, 10.0) is Severity.warning
    assert severity_for(3, None) is Severity.warning
    assert severity_for(4, None) is Severity.error


def test_urls_and_markup() -> None:
    assert section_url("SourceCounters").endswith("#statistical-sampler")
    assert section_url("NoSuchSection").endswith("#sections-and-rules")
    text = "See @section:WarpStateStats:Warp State Statistics@ and @url:Guide:https://x.y/z#a@."
    assert clean_message(text) == "See 'Warp State Statistics' and Guide (https://x.y/z#a)."


def test_classify_launch_bound() -> None:
    k = ProfileResult(name="tiny", sm_throughput_pct=5, memory_throughput_pct=5)
    k.launch = LaunchConfig(grid_size=8, sm_count=132)
    assert classify(k)[0] is Bottleneck.launch
    k.launch = LaunchConfig(grid_size=4096, sm_count=132)
    k.duration_ns = 50_000
    k.memory_throughput_pct = 90
    assert classify(k)[0] is Bottleneck.memory
    k.sm_throughput_pct, k.memory_throughput_pct = 85, 40
    assert classify(k)[0] is Bottleneck.compute


def test_mapping_python_string_by_content(report, tmp_path: Path) -> None:
    py = tmp_path / "somewhere" / "model.py"
    py.parent.mkdir()
    py.write_text("import torch\n\n\nsrc = r'''" + CUDA + "'''\n")
    mapper = SourceMapper(report.sources, candidates=[py])
    m = mapper.resolve(report.kernels[0].source_path)
    assert m is not None and m.local_path == py and m.how == "content"
    # cuda.cu line 8 is string line 5; the string opens on file line 4.
    assert m.line(8) == 8 and m.line(6) == 6
    findings = report_findings(report, mapper)
    assert {f.line for f in findings} == {6, 8}
    assert all(f.path == str(py) and f.source == "ncu" for f in findings)


def test_mapping_without_embedded_source(report, tmp_path: Path) -> None:
    """--map onto a Python file when the report has no copy of the source: load_inline's 3 lines."""
    py = tmp_path / "model.py"
    py.write_text("import torch\n\n\n\nsrc = r'''" + CUDA + "'''\n")
    assert python_string_offset(py.read_text()) == 5 - 1 - 3
    bare = report.model_copy(update={"sources": {}})
    mapper = SourceMapper({}, explicit={"cuda.cu": str(py)})
    lines = {f.line for f in report_findings(bare, mapper)}
    assert lines == {7, 9}  # signature (report line 6) and body (report line 8), shifted by 1


def test_mapping_prefers_existing_path_and_basename(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(){}\n")
    assert SourceMapper({}, candidates=[]).resolve(str(cu)).how == "path"  # type: ignore[union-attr]
    other = tmp_path / "sub" / "k.cu"
    other.parent.mkdir()
    other.write_text("__global__ void k(){}\n")
    m = SourceMapper({}, candidates=[other]).resolve("/build/elsewhere/k.cu")
    assert m is not None and m.how == "basename" and m.line(1) == 1
    assert SourceMapper({}, candidates=[other]).resolve("/build/none.cu") is None


def test_align_follows_inserted_lines() -> None:
    report = "int idx = 0;\nfloat acc = 0.f;\n}\nout[idx] = acc;\n"
    local = "// added\nint idx = 0;\nfloat acc = 0.f;\n}\nint extra = 1;\nout[idx] = acc;\n"
    anchors, matched = align(report, local)
    assert matched == 3  # the lone brace anchors lines but does not count as evidence
    assert (1, 2) in anchors and (3, 4) in anchors and (4, 6) in anchors


def test_find_signature() -> None:
    text = 'x = 1\nsrc = """\n__global__ void\n__launch_bounds__(256)\nmy_k(int* a) {}\n"""\n'
    assert find_signature(text, "my_k") == 5
    assert find_signature(text, "other") is None


def test_summary_hover_lens(report) -> None:
    (k,) = report.kernels
    s = summarize(k, "/x/model.py", 6)
    assert s.duration_us == pytest.approx(56.256) and s.bottleneck == "latency"
    assert s.top_stalls[0].startswith("long_scoreboard")
    hints = top_hints(k)
    assert len(hints) == 3 and hints[0].startswith(("CPIStall", "IssueSlotUtilization"))
    md = hover_markdown(k, speedup=1.4)
    assert "**1.40x** vs eager" in md and "limited by warps" in md and "Roofline" in md
    assert "_Profile of an older version" in hover_markdown(k, stale=True)
    assert lens_title(k) == "ncu: 56.3 µs · latency-bound · SM 51% · mem 43% · occupancy 75%"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stitch_lsp", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_hints_cli_json_and_text(ncu_fixture_dir: Path, tmp_path: Path) -> None:
    py = tmp_path / "model.py"
    py.write_text("import torch\n\n\nsrc = r'''" + CUDA + "'''\n")
    rep = str(ncu_fixture_dir / "relu_bias_full.ncu-rep")
    out = _cli("hints", rep, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"diagnostics", "kernels"}
    d0 = doc["diagnostics"][0]
    assert set(d0) >= {"path", "line", "column", "severity", "code", "message"}
    assert {d["line"] for d in doc["diagnostics"]} == {6, 8}
    assert doc["kernels"][0]["name"] == "relu_bias" and doc["unmapped"] == []

    out = _cli("hints", rep, "--map", f"cuda.cu={py}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "relu_bias" in out.stdout and "latency" in out.stdout
    assert "model.py:8:1: warning: [CPIStall]" in out.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    out = _cli("hints", rep, cwd=empty)
    assert "--map" in out.stderr and "cuda.cu" in out.stderr  # tells the user how to map

    out = _cli("hints", rep, "--map", "cuda.cu", cwd=tmp_path)
    assert out.returncode != 0 and "REPORT_PATH=LOCAL_PATH" in out.stderr


def test_kernel_found_by_name_without_line_info(report, tmp_path: Path) -> None:
    """A report without usable source paths still puts kernel-level rules on the signature."""
    cu = tmp_path / "relu.cu"
    cu.write_text("// other code\n\n__global__ void relu_bias(const float* x) {}\n")
    bare = report.model_copy(deep=True, update={"sources": {}})
    for k in bare.kernels:
        k.source_path = None
    findings = report_findings(bare, SourceMapper({}, candidates=[cu]))
    rules = [f for f in findings if f.code == "SOLBottleneck"]
    assert rules and all(f.line == 3 and f.path == str(cu) for f in rules)


def test_kernels_without_source_go_on_forward(report, tmp_path: Path) -> None:
    """Library kernels (cuBLAS, torch's own) of a profiled Model land on its forward()."""
    from stitch_lsp.profile.findings import module_anchor

    text = (
        "import torch\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        pass\n\n"
        "    def forward(self, x):\n        return torch.relu(x)\n\n"
        "class Other:\n    def forward(self): ...\n"
    )
    py = tmp_path / "ref.py"
    py.write_text(text)
    anchor = module_anchor(py, text)
    assert anchor is not None and anchor.line == 7
    assert (
        module_anchor(py, "class Model:\n    x = 1\n\nclass B:\n    def forward(self): ...\n").line
        == 1
    )  # type: ignore[union-attr]
    bare = report.model_copy(deep=True, update={"sources": {}})
    for k in bare.kernels:
        k.source_path = None
    findings = report_findings(bare, SourceMapper({}, candidates=[py]), anchor)
    assert {f.line for f in findings if f.code == "SOLBottleneck"} == {7}


def test_repeated_launches_report_once(report) -> None:
    """A kernel launched several times gives one set of findings (its longest launch)."""
    from stitch_lsp.profile.findings import representatives

    (k,) = report.kernels
    short = k.model_copy(update={"duration_ns": 10.0})
    assert representatives([short, k]) == [k]
    doubled = report.model_copy(update={"kernels": [short, k]})
    assert len(report_findings(doubled, SourceMapper(report.sources))) == len(
        report_findings(report, SourceMapper(report.sources))
    )
