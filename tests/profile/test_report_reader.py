"""ncu_report is optional (the `profile` extra): without it, a clear message, and Nsight
Compute's own copy in `extras/python` is used when there is one (aarch64 hosts have no wheel)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from stitch_lsp.profile.worker import report


@pytest.fixture
def no_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import raises ImportError
    monkeypatch.setattr(report, "_NCU_FOLDERS", ())
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("STITCH_NCU_PATH", raising=False)
    return tmp_path


def test_missing_reader_names_what_to_install(no_wheel: Path, ncu_fixture_dir: Path) -> None:
    with pytest.raises(report.ReportError, match=r"pip install 'stitch-lsp\[profile\]'"):
        report.load_report(ncu_fixture_dir / "relu_bias_full.ncu-rep")


def test_the_copy_beside_ncu_is_used(no_wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install = no_wheel / "nsight-compute-2025.3"
    (install / "extras" / "python").mkdir(parents=True)
    (install / "extras" / "python" / "ncu_report.py").write_text("WHERE = 'extras'\n")
    ncu = install / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    (no_wheel / "bin").mkdir()
    os.symlink(ncu, no_wheel / "bin" / "ncu")
    import stitch_lsp.profile.worker.measure  # noqa: F401  (before the wheel's folder goes)

    monkeypatch.delitem(sys.modules, "ncu_report")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "site-packages" not in p])
    module = report.ncu_report_module()
    assert module.WHERE == "extras"
    monkeypatch.delitem(sys.modules, "ncu_report")
