"""The profile feature's providers called in-process: speedup in hover and lens, stale marks."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import Document
from stitch_lsp.profile.worker.report import load_report
from stitch_lsp.server.app import create_server
from stitch_lsp.server.documents import OpenDocument
from stitch_lsp.server.features.common import VerifiedSpeedups
from stitch_lsp.server.features.profile import DocProfile, ProfileStore, text_hash

REPO = Path(__file__).resolve().parents[2]


def test_verified_speedup_and_staleness(tmp_path: Path) -> None:
    src = REPO / "examples/kernels/profile_inline_transpose.py"
    text = src.read_text()
    server = create_server(devices=[])
    store = server.store(ProfileStore)
    report = load_report(REPO / "tests/fixtures/ncu/profile_inline_transpose.ncu-rep")
    uri = (tmp_path / "t.py").as_uri()
    doc = OpenDocument(uri, Document(uri, text, "python", 1), server.settings)
    sig = next(i for i, ln in enumerate(text.splitlines(), 1) if "void transpose_inline" in ln)
    store.put(uri, DocProfile(text_hash(text), "r.ncu-rep", [], [(report.kernels[0], sig)]))
    server.store(VerifiedSpeedups).record(uri, text, 1.37)

    lenses = server.code_lens_providers["profile"](doc)
    titles = [x.command.title for x in lenses]  # type: ignore[union-attr]
    assert any("1.37x vs eager" in t and "memory-bound" in t for t in titles)
    col = text.splitlines()[sig - 1].index("transpose_inline") + 1
    md = server.hover_providers["profile"](doc, lsp.Position(line=sig - 1, character=col))
    assert md is not None and "**1.37x** vs eager (verified)" in md

    doc.doc.apply_change((0, 0, 0, 0), "# edited\n", version=2)
    lenses = server.code_lens_providers["profile"](doc)
    assert all("stale" in x.command.title for x in lenses)  # type: ignore[union-attr]
    md = server.hover_providers["profile"](doc, lsp.Position(line=sig, character=col))
    assert md is not None and "older version" in md and "1.37x" not in md
    assert server.diagnostic_sources["ncu"](doc) == []
