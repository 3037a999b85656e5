"""Diagnostics while they are being collected: a range in the document and a rule."""

from __future__ import annotations

from dataclasses import dataclass

from stitch_lsp.analysis.rules import rule
from stitch_lsp.models.findings import Finding, Severity

Range = tuple[int, int, int, int]


@dataclass(slots=True, frozen=True)
class Diag:
    range: Range
    severity: Severity
    rule_id: str
    message: str

    def finding(self, path: str) -> Finding:
        r = rule(self.rule_id)
        sl, sc, el, ec = self.range
        return Finding(
            path=path,
            line=sl + 1,
            column=sc + 1,
            end_line=el + 1,
            end_column=ec + 1,
            severity=self.severity,
            code=r.code,
            message=self.message,
            url=r.url,
        )
