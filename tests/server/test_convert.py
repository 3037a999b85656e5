"""Finding (1-based) <-> Diagnostic (0-based), in the one place that converts them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp

from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.server.convert import diagnostic_to_finding, finding_to_diagnostic


def test_positions_severity_code_source_and_link() -> None:
    f = Finding(
        path="k.cu",
        line=3,
        column=5,
        severity=Severity.hint,
        code="stitch.launch-unchecked",
        message="m",
        url="https://docs.nvidia.com/cuda/",
    )
    d = finding_to_diagnostic(f, lambda line: 20 if line == 2 else None)
    assert (d.range.start.line, d.range.start.character) == (2, 4)
    assert (d.range.end.line, d.range.end.character) == (2, 20)  # to the end of the line
    assert d.severity == lsp.DiagnosticSeverity.Hint
    assert d.code == "stitch.launch-unchecked" and d.source == "stitch"
    assert d.code_description.href == "https://docs.nvidia.com/cuda/"
    no_lines = finding_to_diagnostic(f)
    assert no_lines.range.end == no_lines.range.start


def test_explicit_end_and_ncu_source() -> None:
    f = Finding(
        path="a.py",
        line=1,
        column=1,
        end_line=2,
        end_column=4,
        severity=Severity.warning,
        code="UncoalescedGlobalAccess",
        message="m",
        source="ncu",
    )
    d = finding_to_diagnostic(f)
    assert (d.range.end.line, d.range.end.character) == (1, 3)
    assert d.source == "ncu" and d.code_description is None


# a loaded machine (the suite's other workers) must not fail it on time: no deadline
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    line=st.integers(1, 10_000),
    col=st.integers(1, 500),
    span=st.integers(0, 50),
    severity=st.sampled_from(list(Severity)),
)
def test_roundtrip(line: int, col: int, span: int, severity: Severity) -> None:
    f = Finding(
        path="x.py",
        line=line,
        column=col,
        end_line=line,
        end_column=col + span,
        severity=severity,
        code="stitch.x",
        message="m",
    )
    back = diagnostic_to_finding(finding_to_diagnostic(f), "x.py")
    assert back == f
