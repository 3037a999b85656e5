"""The smaller defects, one test each: output names past a dangling symlink, what the CLI prints
(rich markup, compile-only summaries, verify's stages), lone CRs through edits, the loop's
memory of finished handlers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

from stitch_lsp.agents.command import _attempt_line
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions
from stitch_lsp.analysis import Document, analyze
from stitch_lsp.candidate_files import free_name, with_header, write_new
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import Attempt, CoderStage, Verdict
from stitch_lsp.profile.mapping import workspace_candidates
from tests.agents.helpers import REFERENCE, FakeVerifier, fake_analysis, reply
from tests.hostile.rpc import RawServer

TESTS = Path(__file__).resolve().parents[1]


def test_a_dangling_symlink_takes_the_name_and_the_next_is_used(tmp_path: Path) -> None:
    ref = tmp_path / "m.py"
    ref.write_text("x = 1\n")
    (tmp_path / "m_stitch.py").symlink_to(tmp_path / "gone.py")  # dangling
    out = free_name(ref)
    assert out.name == "m_stitch_2.py"
    write_new(out, with_header("y = 2\n", ref, out))
    assert out.read_text().startswith("# stitch-lsp: reference=m.py")
    assert not (tmp_path / "gone.py").exists()  # nothing was written through the link


def test_the_stage_is_printed_literally_not_as_markup() -> None:
    attempt = Attempt(
        index=1,
        stage=CoderStage.draft,
        coder="llm",
        verdict=Verdict(status="compiled", message="built [ok]"),
    )
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(_attempt_line(attempt, 5))
    assert buf.getvalue().strip() == "attempt 1/5 [draft] compiled"


def test_compile_only_does_not_claim_the_target(tmp_path: Path) -> None:
    from stitch_lsp.agents.coder import BuiltinCoder, BuiltinDraft
    from tests.agents.helpers import candidate

    ref = tmp_path / "ref.py"
    ref.write_text(REFERENCE)
    coder = BuiltinCoder(lambda: BuiltinDraft(True, candidate("VERDICT passed 1.5"), ""))
    loop = GenerationLoop(
        ref,
        Settings(),
        coder,
        FakeVerifier(),
        options=LoopOptions(compile_only=True),
        analyze=fake_analysis,
        cancel=threading.Event(),
    )
    result = loop.run()
    assert result.stopped == "compiled"
    assert "NOT verified" in result.message
    assert "1/1" not in result.message


def test_lone_crs_stay_one_line_break_through_edits() -> None:
    text = "import torch\rclass Model(torch.nn.Module):\r    def forward(self, x):\r        pass\r"
    doc = Document("file:///m.py", text, "python")
    assert not analyze(doc).diagnostics
    lines = doc.index.line_count
    doc.apply_change((1, 0, 1, 0), "\n")  # a LF typed after a CR: the editor sees one CRLF
    assert doc.index.line_count == lines
    doc.apply_change((0, 0, 0, 0), "# a\r")  # a new CR-only line
    assert doc.index.line_count == lines + 1
    assert not analyze(doc).diagnostics
    fresh = Document("file:///m.py", "# a\r" + text[:13] + "\n" + text[13:], "python")
    assert fresh.data == doc.data


def test_check_reports_a_cr_only_file_and_empty_blocks_clean(tmp_path: Path) -> None:
    (tmp_path / "cr.py").write_bytes(b"import torch\rx = torch.zeros(3)\r")
    (tmp_path / "k.cu").write_text("__global__ void k(){{}}\n__global__ void j(){ {} {} }\n")
    proc = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "check", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    codes = [d["code"] for d in json.loads(proc.stdout)["diagnostics"]]
    assert "stitch.parse-error" not in codes


def test_the_walk_for_report_sources_is_bounded(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"d{i}").mkdir()
        for j in range(20):
            (tmp_path / f"d{i}" / f"f{j}.txt").write_text("")
        (tmp_path / f"d{i}" / "k.cu").write_text("")
    found = workspace_candidates([tmp_path], limit=5)
    assert len(found) == 5
    assert workspace_candidates([tmp_path], limit=1000, max_entries=100) != []
    assert len(workspace_candidates([tmp_path], limit=1000, max_entries=100)) < 30
    assert workspace_candidates([tmp_path], limit=5) == found  # the same tree, the same list


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_verify_prints_its_stages_as_they_happen(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text(REFERENCE)
    cand = tmp_path / "cand.py"
    cand.write_text(reply("VERDICT passed").split("```python\n")[1].split("```")[0])
    proc = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "verify", str(ref), str(cand), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    stages = [ln for ln in proc.stderr.splitlines() if ln.startswith("verify: ")]
    assert stages and stages[0].startswith("verify: static checks")
    assert json.loads(proc.stdout)["diagnostics"]  # the static findings that ended it


def test_the_phase_watch_reports_each_phase_once(tmp_path: Path) -> None:
    """The launcher reads the worker's saved result when it changes; the Verifier tells each
    new phase once, in words."""
    from stitch_lsp.verify.client import _phase_reporter
    from stitch_lsp.workers.launch import _PartialWatch

    heard: list[str] = []
    path = tmp_path / "result.json"
    watch = _PartialWatch(path, _phase_reporter(heard.append))
    watch()  # no file yet
    for i, phase in enumerate(["import", "import", "build", "correctness", "timing"]):
        path.write_text(json.dumps({"phase": phase}))
        os.utime(path, ns=(i * 10**9 + 10**9, i * 10**9 + 10**9))
        watch()
    assert heard == [
        "importing the reference and the candidate",
        "building",
        "checking correctness",
        "timing against the baselines",
    ]


def test_opening_and_closing_forgets_the_handlers(tmp_path: Path) -> None:
    srv = RawServer(tmp_path)
    try:
        srv.initialize(tmp_path, {"debounceMs": 0})
        for i in range(100):
            uri = (tmp_path / f"f{i}.py").as_uri()
            srv.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": ""}},
            )
            srv.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "x"}]},
            )
            srv.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        info = srv.call("stitch/debugInfo", {})["result"]
        assert info["documents"] == []
        assert info["pendingHandlers"] <= 3  # pygls kept two per notification: 600 here
    finally:
        srv.close()
