"""The adversarial suite against the static checks (no GPU): hostile candidates are flagged at
warning or above where the trick is, honest ones are not flagged at all."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from stitch_lsp.analysis import check_paths
from stitch_lsp.models.findings import Finding, Severity

from .conftest import SUITE, Case, cases, select

SERIOUS = (Severity.error, Severity.warning)


@cache
def serious(path: Path) -> tuple[Finding, ...]:
    report = check_paths([path])
    return tuple(d for d in report.diagnostics if d.severity in SERIOUS)


@pytest.mark.parametrize("case", select("static", "both"), ids=lambda c: c.name)
def test_hostile_is_flagged_where_the_trick_is(case: Case) -> None:
    found = serious(case.path)
    assert found, f"{case.file} ({case.kind}: {case.disguise}) is not flagged"
    marked = case.marked_lines()
    assert marked, f"{case.file} has no {case.file} HOSTILE marker"
    on_marker = [d for d in found if d.line in marked and d.code in case.codes]
    assert on_marker, (
        f"{case.file}: nothing with {case.codes} on lines {sorted(marked)}; found: "
        + "; ".join(f"{d.line}:{d.column} {d.code} {d.message}" for d in found)
    )


@pytest.mark.parametrize("case", select("honest"), ids=lambda c: c.name)
def test_honest_is_not_flagged(case: Case) -> None:
    found = serious(case.path)
    assert found == (), "; ".join(f"{d.line}:{d.column} {d.code} {d.message}" for d in found)


def test_most_hostile_candidates_are_flagged_statically() -> None:
    hostile = [c for c in cases() if c.hostile]
    flagged = [c for c in hostile if serious(c.path)]
    share = len(flagged) / len(hostile)
    assert share >= 0.95, f"{len(flagged)}/{len(hostile)} flagged"
    # The dynamic-only cases are the ones the static checks cannot see, by design.
    missed = {c.name for c in hostile} - {c.name for c in flagged}
    assert missed == {c.name for c in select("dynamic")}


def test_dynamic_only_cases_are_not_claimed_statically() -> None:
    for case in select("dynamic"):
        assert serious(case.path) == (), f"{case.file} is flagged: mark it `both`"


def test_the_suite_is_complete() -> None:
    listed = {c.file for c in cases()}
    folders = ("hostile", "honest")
    on_disk = {str(p.relative_to(SUITE)) for f in folders for p in (SUITE / f).glob("*.py")}
    assert listed == on_disk
    hostile = [c for c in cases() if c.hostile]
    assert len(hostile) >= 60 and len(select("honest")) >= 20
    per_kind = Counter(c.kind for c in hostile)
    assert all(n >= 3 for n in per_kind.values()), per_kind
    assert select("dynamic") and select("both")
    for case in cases():
        assert case.reference_path.is_file(), case.reference
        if case.expect in ("static", "both"):
            assert case.codes, case.file
