"""Workspace trust is the JSON boolean `true` in `initializationOptions.trusted`, nothing else.

A client that sends no `trusted` is untrusted unless the server was started with
`serve --trust` or STITCH_TRUST=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from stitch_lsp.server.app import TRUST_ENV, is_trusted
from tests.server.lsp_client import (
    REPO,
    SERVER_COMMAND,
    StitchClient,
    debug_info,
    initialize,
    make_client,
)

NOT_TRUE: list[Any] = ["false", 0, {}, "true", 1, None, [], [True], 1.0, "yes"]
EXECUTES_CODE = {"test.run", "test.job"}
_ABSENT = object()


@pytest.mark.parametrize("value", NOT_TRUE, ids=repr)
def test_only_the_boolean_true_trusts(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUST_ENV, "1")  # an explicit value wins over the server's default
    assert is_trusted({"trusted": value}) is False
    assert is_trusted({"trusted": True}) is True
    assert is_trusted({"trusted": False}) is False


ENV_TRUST = [(None, False), ("1", True), ("true", True), ("0", False), ("", False), ("yes", False)]


@pytest.mark.parametrize(("env", "trusted"), ENV_TRUST)
def test_absent_trust_follows_the_server_start(
    env: str | None, trusted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(TRUST_ENV, raising=False)
    else:
        monkeypatch.setenv(TRUST_ENV, env)
    assert is_trusted({}) is trusted
    assert is_trusted({"settings": {}}) is trusted


async def _session(
    tmp_path: Path, *, trusted: Any, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> tuple[dict[str, Any], set[str]]:
    """Start the server (with the test commands), initialize with `trusted` as given (the
    `options` form sends even None as JSON null), and return debugInfo and the commands."""
    client: StitchClient = make_client()
    environment = {k: v for k, v in os.environ.items() if k != TRUST_ENV}
    environment.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        STITCH_EXTRA_FEATURES="tests.server.fake_feature",
        **(env or {}),
    )
    await client.start_io(SERVER_COMMAND[0], *SERVER_COMMAND[1:], *args, env=environment)
    try:
        options = None if trusted is _ABSENT else {"trusted": trusted}
        result = await initialize(client, tmp_path, trusted=None, options=options)
        commands = set(result.capabilities.execute_command_provider.commands)
        info = await debug_info(client)
        if not info["trusted"]:
            with pytest.raises(Exception, match="not defined"):
                await client.workspace_execute_command_async(
                    lsp.ExecuteCommandParams(command="test.run", arguments=[])
                )
        return info, commands
    finally:
        await client.shutdown_session()


@pytest.mark.slow
@pytest.mark.parametrize("value", ["false", 0, {}, "true", 1, None], ids=repr)
async def test_a_value_other_than_true_gets_an_untrusted_session(
    tmp_path: Path, value: Any
) -> None:
    info, commands = await _session(tmp_path, trusted=value, env={TRUST_ENV: "1"})
    assert info["trusted"] is False
    assert "test.info" in commands and not commands & EXECUTES_CODE


@pytest.mark.slow
async def test_true_gets_a_trusted_session(tmp_path: Path) -> None:
    info, commands = await _session(tmp_path, trusted=True)
    assert info["trusted"] is True and commands >= EXECUTES_CODE


@pytest.mark.slow
async def test_a_client_that_says_nothing_is_untrusted(tmp_path: Path) -> None:
    info, commands = await _session(tmp_path, trusted=_ABSENT)
    assert info["trusted"] is False and not commands & EXECUTES_CODE


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--trust", "STITCH_TRUST=1"])
async def test_a_client_that_says_nothing_is_trusted_when_the_server_was_told(
    tmp_path: Path, how: str
) -> None:
    if how == "--trust":
        info, commands = await _session(tmp_path, trusted=_ABSENT, args=("--trust",))
    else:
        info, commands = await _session(tmp_path, trusted=_ABSENT, env={TRUST_ENV: "1"})
    assert info["trusted"] is True and commands >= EXECUTES_CODE


def test_serve_help_documents_trust() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--trust" in out.stdout and "STITCH_TRUST" in out.stdout
