"""The one diagnostic shape shared by `check`, `verify`, `profile`, `hints` and the server."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from stitch_lsp.models.base import Record


class Severity(str, Enum):
    error = "error"
    warning = "warning"
    information = "information"
    hint = "hint"


class Finding(Record):
    """One diagnostic. `line` and `column` are 1-based, as editors and compilers print them."""

    path: str
    line: int = Field(ge=1)
    column: int = Field(1, ge=1)
    end_line: int | None = None
    end_column: int | None = None
    severity: Severity
    code: str = Field(description="stitch.<id> for static checks, the rule id for ncu findings.")
    message: str
    source: str = "stitch"
    url: str | None = None


class CheckReport(Record):
    diagnostics: list[Finding] = Field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.error for d in self.diagnostics)
