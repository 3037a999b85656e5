"""End-to-end: the real server subprocess, driven like VS Code drives it."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.server.lsp_client import (
    StitchClient,
    codes,
    debug_info,
    edit,
    initialize,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).parent / "data"


def _ident(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=uri)


def _by_code(diags: list[lsp.Diagnostic]) -> dict[str, lsp.Diagnostic]:
    return {str(d.code): d for d in diags}


async def test_initialize_advertises_what_exists(client: StitchClient, tmp_path: Path) -> None:
    result = await initialize(client, tmp_path)
    caps = result.capabilities
    assert caps.position_encoding == lsp.PositionEncodingKind.Utf16
    sync = caps.text_document_sync
    assert isinstance(sync, lsp.TextDocumentSyncOptions)
    assert sync.change == lsp.TextDocumentSyncKind.Incremental
    assert caps.hover_provider and caps.document_symbol_provider
    info = await debug_info(client)
    advertised = (
        list(caps.execute_command_provider.commands) if caps.execute_command_provider else []
    )
    assert sorted(advertised) == sorted(info["commands"])
    assert info["torchImported"] is False
    # Watchers and settings notifications are registered dynamically (VS Code allows it).
    methods = {r.method for r in client.registrations}
    assert lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES in methods
    assert lsp.WORKSPACE_DID_CHANGE_CONFIGURATION in methods
    watcher = next(
        r for r in client.registrations if r.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
    )
    globs = {w["globPattern"] for w in watcher.register_options["watchers"]}
    assert globs == {"**/*.py", "**/*.cu", "**/*.cuh"}
    assert client.statuses[0]["state"] == "idle"


async def test_cheating_model_new_gets_diagnostics_on_the_right_lines(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "cheat.py", (DATA / "cheat.py").read_text())
    found = _by_code(await wait_for_diagnostics(client, uri, version=1))
    assert found["stitch.side-stream"].range.start.line == 15  # self.side = torch.cuda.Stream()
    assert found["stitch.torch-op"].range.start.line == 18  # return torch.matmul(a, b) in ModelNew
    assert found["stitch.torch-op"].severity == lsp.DiagnosticSeverity.Error
    assert all(d.source == "stitch" for d in found.values())
    # Findings without an end are underlined to the end of their line.
    d = found["stitch.torch-op"]
    assert d.range.end.line == 18 and d.range.end.character > d.range.start.character


async def test_cuda_file_diagnostics(client: StitchClient, tmp_path: Path) -> None:
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "k.cu", (DATA / "saxpy_unchecked.cu").read_text())
    found = _by_code(await wait_for_diagnostics(client, uri))
    assert found["stitch.kernel-unused"].range.start.line == 7
    assert found["stitch.block-size"].range.start.line == 10
    assert found["stitch.launch-unchecked"].severity == lsp.DiagnosticSeverity.Hint


async def test_incremental_edit_fixes_a_problem_and_debounce_publishes_latest_only(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 300})
    uri = await open_file(client, tmp_path / "cheat.py", (DATA / "cheat.py").read_text())
    assert "stitch.side-stream" in codes(await wait_for_diagnostics(client, uri, version=1))
    published_before = len(client.published)
    # Three quick edits: turn the stream line into a comment, one keystroke at a time.
    edit(client, uri, 2, (15, 8), (15, 8), "#")
    edit(client, uri, 3, (15, 9), (15, 9), " ")
    edit(client, uri, 4, (15, 10), (15, 10), "no stream: ")
    diags = await wait_for_diagnostics(client, uri, version=4)
    assert "stitch.side-stream" not in codes(diags)
    assert _by_code(diags)["stitch.torch-op"].range.start.line == 18
    versions = [p.version for p in client.published[published_before:] if p.uri == uri]
    assert versions == [4], versions  # debounced: only the latest version was published
    # Now delete the whole line: positions below it move up.
    edit(client, uri, 5, (15, 0), (16, 0), "")
    diags = await wait_for_diagnostics(client, uri, version=5)
    assert _by_code(diags)["stitch.torch-op"].range.start.line == 17


async def test_document_symbols_include_kernels_in_cuda_strings(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "inline.py", (DATA / "inline_kernel.py").read_text())
    await wait_for_diagnostics(client, uri)
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=_ident(uri))
    )
    assert symbols and all(isinstance(s, lsp.DocumentSymbol) for s in symbols)
    by_name = {s.name: s for s in symbols}
    kernel = by_name["scale_kernel"]
    assert kernel.kind == lsp.SymbolKind.Function
    assert kernel.selection_range.start.line == 8  # inside the r"""...""" string
    model = by_name["ModelNew"]
    assert model.kind == lsp.SymbolKind.Class
    assert "forward" in {c.name for c in model.children or []}
    wrapper = by_name["scale"]
    launches = [c for c in wrapper.children or [] if c.kind == lsp.SymbolKind.Event]
    assert launches and launches[0].range.start.line == 17


async def test_hover_on_a_kernel_and_a_module(client: StitchClient, tmp_path: Path) -> None:
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "inline.py", (DATA / "inline_kernel.py").read_text())
    await wait_for_diagnostics(client, uri)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(text_document=_ident(uri), position=lsp.Position(line=8, character=18))
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    text = hover.contents.value
    assert "`scale_kernel`" in text and "CUDA kernel" in text
    assert "__global__ void scale_kernel(const float* x, float* y, float s, int n)" in text
    assert "line 18" in text and "<<<blocks, 256" in text  # the launch site and its config
    assert "load_inline" in text and "`scale_ext`" in text  # which call builds it
    hover = await client.text_document_hover_async(
        lsp.HoverParams(text_document=_ident(uri), position=lsp.Position(line=31, character=8))
    )
    assert hover is not None
    assert "class `ModelNew`" in hover.contents.value
    assert "forward(self, x)" in hover.contents.value
    nothing = await client.text_document_hover_async(
        lsp.HoverParams(text_document=_ident(uri), position=lsp.Position(line=0, character=0))
    )
    assert nothing is None


async def test_configuration_change_is_picked_up(client: StitchClient, tmp_path: Path) -> None:
    text = (DATA / "cheat.py").read_text() + "# padding\n" * 100
    await initialize(client, tmp_path, configuration={"maxFileBytes": 1000})
    uri = await open_file(client, tmp_path / "cheat.py", text)
    assert len(text.encode()) > 1000
    diags = await wait_for_diagnostics(client, uri)
    assert codes(diags) == ["stitch.file-too-large"]
    assert diags[0].severity == lsp.DiagnosticSeverity.Information
    n = len(client.published)
    client.set_configuration({"maxFileBytes": 5_000_000, "debounceMs": 0}, section="stitch")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: len(client.published) > n)
    diags = await wait_for_diagnostics(client, uri)
    assert "stitch.file-too-large" not in codes(diags)
    assert "stitch.torch-op" in codes(diags)
    info = await debug_info(client)
    assert info["settings"]["debounceMs"] == 0


async def test_invalid_settings_are_dropped_one_by_one(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(
        client, tmp_path, settings={"debounceMs": -5, "trials": 7}, configuration={"llmModel": "x"}
    )
    info = await debug_info(client)
    assert info["settings"]["debounceMs"] == 250  # the default, the bad value was dropped
    assert info["settings"]["trials"] == 7
    assert info["settings"]["llmModel"] == "x"
    assert any("stitch.debounceMs" in m.message for m in client.messages)


async def test_garbage_and_odd_files_do_not_crash_the_server(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    garbage = "def (((:\n\x00\x01\x02 class ModelNew(:\n\udcff\udcfe 'unterminated\n" * 50
    uri1 = await open_file(client, tmp_path / "garbage.py", garbage, write=False)
    uri2 = await open_file(
        client, tmp_path / "garbage.cu", "__global__ void k( {{{ <<<\n\udcff", write=False
    )
    emoji = "# 🙂 ünïcödé\nclass ModelNew:\n    def forward(self, x):\n        return x\n"
    uri3 = await open_file(client, tmp_path / "emoji.py", emoji, write=False)
    d1 = await wait_for_diagnostics(client, uri1)
    assert codes(d1).count("stitch.parse-error") <= 1
    await wait_for_diagnostics(client, uri2)
    await wait_for_diagnostics(client, uri3)
    # An edit past the end of the document, and one inside a surrogate pair: still fine.
    edit(client, uri3, 2, (40, 0), (41, 3), "x")
    edit(client, uri3, 3, (0, 3), (0, 3), "!")
    await wait_for_diagnostics(client, uri3, version=3)
    for uri in (uri1, uri2, uri3):
        await client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=_ident(uri))
        )
        await client.text_document_hover_async(
            lsp.HoverParams(text_document=_ident(uri), position=lsp.Position(line=3, character=2))
        )
    # A file the client never opened, and a closed one: answered, no crash.
    gone = (tmp_path / "never.py").as_uri()
    assert (
        await client.text_document_hover_async(
            lsp.HoverParams(text_document=_ident(gone), position=lsp.Position(line=0, character=0))
        )
        is None
    )
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=_ident(uri1)))
    await wait_until(lambda: list(client.diagnostics.get(uri1, [None])) == [])
    info = await debug_info(client)  # the server still answers
    assert {d["uri"] for d in info["documents"]} == {uri2, uri3}


async def test_reference_change_on_disk_rechecks_the_candidate(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    ref = tmp_path / "ref.py"
    ref.write_text((DATA / "ref_fp16.py").read_text())
    cand_text = (DATA / "candidate_half.py").read_text()
    uri = await open_file(client, tmp_path / "candidate.py", cand_text)
    assert "stitch.downcast" not in codes(await wait_for_diagnostics(client, uri))
    # The reference becomes fp32 on disk (not open in the editor): the .half() is now a cheat.
    shutil.copy(DATA / "ref_fp32.py", ref)
    n = len(client.published)
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=ref.as_uri(), type=lsp.FileChangeType.Changed)]
        )
    )
    await wait_until(lambda: len(client.published) > n)
    assert "stitch.downcast" in codes(await wait_for_diagnostics(client, uri))
    ref.unlink()
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=ref.as_uri(), type=lsp.FileChangeType.Deleted)]
        )
    )
    await wait_until(lambda: any("was deleted" in m.message for m in client.log_messages))


async def test_a_changed_cu_source_rechecks_the_python_file_that_loads_it(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path)
    (tmp_path / "kern.cu").write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    text = 'from torch.utils.cpp_extension import load\next = load(name="k", sources=["kern.cu"])\n'
    uri = await open_file(client, tmp_path / "uses_cu.py", text)
    await wait_for_diagnostics(client, uri)
    n = len([p for p in client.published if p.uri == uri])
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[
                lsp.FileEvent(uri=(tmp_path / "kern.cu").as_uri(), type=lsp.FileChangeType.Changed)
            ]
        )
    )
    await wait_until(lambda: len([p for p in client.published if p.uri == uri]) > n)
    # A file nobody depends on changes: nothing is re-published for it.
    m = len(client.published)
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[
                lsp.FileEvent(
                    uri=(tmp_path / "unrelated.py").as_uri(), type=lsp.FileChangeType.Created
                )
            ]
        )
    )
    await debug_info(client)  # a round trip: the notification has been handled
    await asyncio.sleep(0.1)
    assert len(client.published) == m


async def test_edits_in_a_large_file_keep_every_finding_on_its_line(
    client: StitchClient, tmp_path: Path
) -> None:
    """A file large enough to be kept as several statement runs: edits before, inside and
    after the findings, a syntax error and its fix, each published with the right lines."""
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    filler = "".join(
        f"class Helper{i}(nn.Module):\n    def forward(self, x):\n        return x + {i}\n\n\n"
        for i in range(200)
    )
    cheat = (DATA / "cheat.py").read_text()
    text = "import torch\nimport torch.nn as nn\n\n\n" + filler + cheat
    base = text.count("\n") - cheat.count("\n")  # line of cheat.py's first line
    uri = await open_file(client, tmp_path / "big_cheat.py", text)
    found = _by_code(await wait_for_diagnostics(client, uri, version=1))
    assert found["stitch.side-stream"].range.start.line == base + 15
    lines = text.split("\n")
    # One character typed in the middle of the filler (the text after it moves by a byte).
    row = lines.index("        return x + 99")
    edit(client, uri, 2, (row, 21), (row, 21), "0")
    found = _by_code(await wait_for_diagnostics(client, uri, version=2))
    assert found["stitch.side-stream"].range.start.line == base + 15
    assert found["stitch.torch-op"].range.start.line == base + 18
    info = await debug_info(client)
    assert next(d for d in info["documents"] if d["uri"] == uri)["syntaxTrees"] > 1
    # Two lines inserted at the top: every finding moves down two lines.
    edit(client, uri, 3, (0, 0), (0, 0), "# header\n# more\n")
    found = _by_code(await wait_for_diagnostics(client, uri, version=3))
    assert found["stitch.side-stream"].range.start.line == base + 17
    # An unclosed bracket in the filler: a parse error there, findings still reported.
    row = lines.index("class Helper60(nn.Module):") + 2
    edit(client, uri, 4, (row, 14), (row, 14), "(")
    found = _by_code(await wait_for_diagnostics(client, uri, version=4))
    assert "stitch.parse-error" in found
    # Closing it again: the error goes, and the findings are where they were.
    edit(client, uri, 5, (row, 14), (row, 15), "")
    found = _by_code(await wait_for_diagnostics(client, uri, version=5))
    assert "stitch.parse-error" not in found
    assert found["stitch.side-stream"].range.start.line == base + 17
    assert found["stitch.torch-op"].range.start.line == base + 20
    info = await debug_info(client)
    doc = next(d for d in info["documents"] if d["uri"] == uri)
    assert doc["version"] == 5 and doc["syntaxTrees"] == 1  # whole again after the error
