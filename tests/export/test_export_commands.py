"""`generate --standalone` and the "Export standalone copy" code action, end to end."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from stitch_lsp.export.standalone import uses_runtime
from tests.export.test_standalone import GENERATED
from tests.server.lsp_client import StitchClient, _plain, initialize, open_file

REPO = Path(__file__).resolve().parents[2]


async def actions(client: StitchClient, uri: str) -> dict[str, dict[str, Any]]:
    """title -> command ({command, arguments}) of the code actions at the top of the file.

    pytest-lsp decodes a CodeAction that carries a command as a Command whose `command` is the
    nested object's repr; both shapes are read."""
    pos = lsp.Position(line=0, character=0)
    found = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=pos, end=pos),
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )
    out: dict[str, dict[str, Any]] = {}
    for a in found or []:
        if isinstance(a, lsp.CodeAction) and a.command is not None:
            out[a.title] = {"command": a.command.command, "arguments": a.command.arguments}
        elif isinstance(a, lsp.Command) and a.command.startswith("{"):
            out[a.title] = ast.literal_eval(a.command)
    return out


async def test_export_action_writes_a_new_copy_each_time_and_never_overwrites(
    client: StitchClient, tmp_path: Path
) -> None:
    client.apply_edits_to_disk = True
    await initialize(client, tmp_path, trusted=False)  # it runs nothing: offered untrusted too
    (tmp_path / "ref.py").write_text("class Model: ...\n")
    uri = await open_file(client, tmp_path / "ref_stitch.py", GENERATED)
    cmd = (await actions(client, uri))["Export standalone copy"]
    assert cmd["command"] == "stitch.exportStandalone"

    outputs = []
    for _ in range(2):
        result = _plain(
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command=cmd["command"], arguments=cmd["arguments"])
            )
        )
        assert result["ok"], result
        outputs.append(result["output"])
    assert outputs == [
        (tmp_path / "ref_stitch_standalone.py").as_uri(),
        (tmp_path / "ref_stitch_standalone_2.py").as_uri(),
    ]
    first = (tmp_path / "ref_stitch_standalone.py").read_text()
    assert not uses_runtime(first) and "load_inline" in first
    assert first == (tmp_path / "ref_stitch_standalone_2.py").read_text()
    # A copy offers no further export.
    copy_uri = await open_file(client, tmp_path / "ref_stitch_standalone.py")
    assert "Export standalone copy" not in await actions(client, copy_uri)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_generate_standalone_writes_a_load_inline_file(tmp_path: Path) -> None:
    ref = tmp_path / "layernorm_gelu.py"
    shutil.copy(REPO / "examples" / "layernorm_gelu.py", ref)
    (tmp_path / "layernorm_gelu_stitch.py").write_text("# the user's file\n")
    proc = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "generate", str(ref), "--verify", "compile",
         "--coder", "builtin", "--standalone"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "layernorm_gelu_stitch.py").read_text() == "# the user's file\n"
    out = tmp_path / "layernorm_gelu_stitch_2.py"
    text = out.read_text()
    assert text.startswith("# stitch-lsp: reference=layernorm_gelu.py\n# Standalone copy")
    assert not uses_runtime(text) and "load_inline(" in text
    assert 'extern "C" int stitch_fused_' in text  # the same launchers
