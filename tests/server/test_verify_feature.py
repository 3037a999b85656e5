"""`stitch.verify` end to end: the real server, GPUs hidden, so the Verifier builds with nvcc only.

The candidates use the `stitch_lsp.runtime.load_cuda` style, which nvcc compiles here in about a
second with no GPU and no torch headers.
"""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig

from tests.server.lsp_client import (
    REPO,
    SERVER_COMMAND,
    SERVER_NO_GPU,
    StitchClient,
    edit,
    initialize,
    make_lens_client,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parents[1] / "verify" / "data"  # the Verifier's own fixtures
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="nvcc not found: the Verifier cannot compile the candidate",
)


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


LONELY = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"


def _copy(tmp: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        dst = tmp / name
        dst.write_text((DATA / name).read_text())
        out.append(dst)
    return out


def _row(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines()) if needle in ln)


async def _lenses(client: StitchClient, uri: str) -> list[tuple[int, str, str, list[Any]]]:
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    return [
        (x.range.start.line, x.command.title, x.command.command, list(x.command.arguments or []))
        for x in lenses or []
        if x.command is not None and x.command.command == "stitch.verify"
    ]


async def _verify(client: StitchClient, arg: Any) -> dict[str, Any]:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="stitch.verify", arguments=[arg])
    )


def _command_of(action: lsp.CodeAction | lsp.Command) -> str:
    """pytest-lsp decodes a CodeAction carrying a command as a Command whose `command` is the
    nested object's repr; accept both shapes."""
    if isinstance(action, lsp.CodeAction):
        assert action.command is not None
        return action.command.command
    if action.command.startswith("{"):
        return ast.literal_eval(action.command)["command"]
    return action.command


async def test_advertised_with_a_lens_and_an_action_on_a_pair(
    client: StitchClient, tmp_path: Path
) -> None:
    result = await initialize(client, tmp_path, settings={"debounceMs": 0})
    assert "stitch.verify" in result.capabilities.execute_command_provider.commands
    (pair,) = _copy(tmp_path, "pair_good.py")
    uri = await open_file(client, pair, pair.read_text())
    row = _row(pair, "class ModelNew")
    assert await _lenses(client, uri) == [(row, "Verify against reference", "stitch.verify", [uri])]
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(
                start=lsp.Position(line=row + 2, character=8),
                end=lsp.Position(line=row + 2, character=8),
            ),
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )
    ours = [a for a in actions or [] if a.title == "Verify against reference"]
    assert len(ours) == 1 and _command_of(ours[0]) == "stitch.verify"
    # a file with Model only has nothing to verify: no lens
    (ref,) = _copy(tmp_path, "ref_bias_relu.py")
    ref_uri = await open_file(client, ref, ref.read_text())
    assert await _lenses(client, ref_uri) == []


@needs_nvcc
async def test_compile_error_is_a_diagnostic_on_the_cuda_line(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    _, cand = _copy(tmp_path, "ref_bias_relu.py", "cand_compile_error.py")
    uri = await open_file(client, cand, cand.read_text())
    await wait_for_diagnostics(client, uri, version=1)
    res = await _verify(client, {"uri": uri})
    assert res["status"] == "compile_error" and not res["ok"], res
    assert res["compileOnly"] is True
    bad = _row(cand, "undeclared_helper(i);")

    def ours() -> list[lsp.Diagnostic]:
        return [d for d in client.diagnostics.get(uri, []) if d.source == "stitch-verify"]

    await wait_until(lambda: bool(ours()), 10)
    (err,) = [d for d in ours() if d.severity == lsp.DiagnosticSeverity.Error]
    assert err.range.start.line == bad and "undeclared_helper" in err.message
    row = _row(cand, "class ModelNew")
    assert (row, "compile error (1)", "stitch.verify", [uri]) in await _lenses(client, uri)
    assert any(s.get("state") == "done" for s in client.statuses)
    assert getattr(client, "lens_refreshes", 0) >= 1

    # an edit hides the findings (they described other text) and marks the lens stale;
    # undoing back to the verified text brings both back without a new run
    edit(client, uri, 2, (0, 0), (0, 0), "# note\n")
    await wait_until(lambda: not ours(), 10)
    titles = [t for _, t, _, _ in await _lenses(client, uri)]
    assert "compile error (1) (stale: file changed)" in titles
    edit(client, uri, 3, (0, 0), (1, 0), "")
    await wait_until(lambda: bool(ours()), 10)
    assert "compile error (1)" in [t for _, t, _, _ in await _lenses(client, uri)]


@needs_nvcc
async def test_clean_pair_without_a_gpu_says_it_was_not_verified(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    (pair,) = _copy(tmp_path, "pair_good.py")
    uri = await open_file(client, pair, pair.read_text())
    res = await _verify(client, uri)
    assert res["status"] == "no_gpu" and res["compileOnly"] is True, res
    assert "correctness and speed were NOT verified" in res["message"]
    assert any("NOT verified" in m.message for m in client.messages)
    assert res["speedupVsEager"] is None
    titles = [t for _, t, _, _ in await _lenses(client, uri)]
    assert "compiled (no GPU: not run)" in titles
    again = await _verify(client, uri)  # same content: the cached outcome
    assert again["cached"] is True and again["status"] == "no_gpu"


async def test_refusals(client: StitchClient, tmp_path: Path) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    lonely = tmp_path / "lonely.py"
    uri = await open_file(client, lonely, LONELY)
    res = await _verify(client, uri)
    assert not res["ok"] and "no reference" in res["message"], res
    assert "reference=PATH" in res["message"]
    assert await _lenses(client, uri) == []

    missing = tmp_path / "missing_ref.py"
    text = "# stitch-lsp: reference=nowhere.py\n" + LONELY
    uri = await open_file(client, missing, text)
    res = await _verify(client, uri)
    assert not res["ok"] and "does not exist" in res["message"], res

    (pair,) = _copy(tmp_path, "pair_good.py")
    pair_uri = await open_file(client, pair, pair.read_text() + "\n# unsaved\n", write=False)
    res = await _verify(client, pair_uri)
    assert not res["ok"] and "save the file first" in res["message"], res


async def test_untrusted_workspace_does_not_offer_it(client: StitchClient, tmp_path: Path) -> None:
    result = await initialize(client, tmp_path, settings={"debounceMs": 0}, trusted=False)
    assert "stitch.verify" not in (result.capabilities.execute_command_provider.commands or [])
    (pair,) = _copy(tmp_path, "pair_good.py")
    uri = await open_file(client, pair, pair.read_text())
    await wait_for_diagnostics(client, uri, version=1)
    assert await _lenses(client, uri) == []


@needs_nvcc
async def test_verify_on_save(client: StitchClient, tmp_path: Path) -> None:
    await initialize(client, tmp_path, settings={"debounceMs": 0, "verifyOnSave": True})
    _, cand = _copy(tmp_path, "ref_bias_relu.py", "cand_compile_error.py")
    uri = await open_file(client, cand, cand.read_text())
    client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )

    def ours() -> list[lsp.Diagnostic]:
        return [d for d in client.diagnostics.get(uri, []) if d.source == "stitch-verify"]

    await wait_until(lambda: bool(ours()), 30)
    assert ours()[0].range.start.line == _row(cand, "undeclared_helper(i);")


def test_result_one_liners() -> None:
    from stitch_lsp.models.verify import (
        CorrectnessReport,
        TrialResult,
        VerifyResult,
        VerifyStatus,
    )
    from stitch_lsp.server.features.verify import result_message, result_title

    passed = VerifyResult(
        status=VerifyStatus.passed, speedup_vs_eager=1.3249, speedup_vs_compile=1.1
    )
    assert result_title(passed) == "✓ passed · 1.32x vs eager · 1.10x vs torch.compile"
    wrong = VerifyResult(
        status=VerifyStatus.incorrect,
        message="trial 0: 12 mismatches",
        correctness=CorrectnessReport(
            passed=False,
            atol=1e-2,
            rtol=1e-2,
            trials=[
                TrialResult(index=0, passed=False, max_abs_error=0.031, first_mismatch=[0, 17])
            ],
        ),
    )
    assert result_title(wrong) == "✗ incorrect: max abs err 3.1e-2 at (0, 17)"
    assert "12 mismatches" in result_message(wrong)
    assert result_title(VerifyResult(status=VerifyStatus.timeout)) == "✗ timed out"


FAKE_GPU = ClientServerConfig(
    server_command=SERVER_COMMAND,
    client_factory=make_lens_client,
    server_env={
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "STITCH_EXTRA_FEATURES": "tests.server.fake_gpu_verifier",
    },
)


@pytest_lsp.fixture(config=FAKE_GPU)
async def gpu_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


async def test_a_pass_reaches_the_lens_the_profile_store_and_the_status_bar(
    gpu_client: StitchClient, tmp_path: Path
) -> None:
    """With a (pretend) GPU and a scripted `passed` result from the Verifier."""
    client = gpu_client
    await initialize(client, tmp_path, settings={"debounceMs": 0})
    _, cand = _copy(tmp_path, "ref_bias_relu.py", "cand_compile_error.py")
    uri = await open_file(client, cand, cand.read_text())
    res = await _verify(client, uri)
    assert res["ok"] and res["status"] == "passed" and res["compileOnly"] is False, res
    assert res["title"] == "✓ passed · 1.32x vs eager · 1.10x vs torch.compile"
    row = _row(cand, "class ModelNew")
    assert (row, res["title"], "stitch.verify", [uri]) in await _lenses(client, uri)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=row, character=len("class M")),
        )
    )
    assert hover is not None and f"**Verifier** · {res['title']}" in hover.contents.value
    done = [s for s in client.statuses if s.get("state") == "done"]
    assert done and done[-1].get("speedup") == pytest.approx(1.32)
    info = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="test.verifyCalls", arguments=[])
    )
    assert info["speedups"] == [pytest.approx(1.32)]
    (call,) = info["calls"]
    assert call["compile_only"] is False and call["device"] == "cuda:0"
    assert Path(call["reference"]).name == "ref_bias_relu.py"
