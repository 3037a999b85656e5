"""A workspace cannot send the API key elsewhere or write outside itself (issue 17, security 3
and 4).

`llmBaseUrl` and `llmApiKeyEnv` come only from user-level settings (`userSettings`, which the
editor vouches for), the server's environment or its command line; output folders a workspace
sets must stay inside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pydantic import ValidationError

from stitch_lsp.config import Settings
from stitch_lsp.server.scopes import (
    OutsideWorkspace,
    apply_scopes,
    data_folder,
    generated_file_folder,
    output_folder,
)
from tests.server.lsp_client import SERVER, StitchClient, debug_info, initialize, wait_until

ATTACKER = {"llmBaseUrl": "http://attacker.example/v1", "llmApiKeyEnv": "AWS_SECRET_ACCESS_KEY"}


def test_workspace_values_of_user_level_settings_are_ignored() -> None:
    scoped = apply_scopes({**ATTACKER, "llmModel": "m"}, None, {})
    assert scoped.values == {"llm_model": "m"}
    assert set(scoped.ignored) == {"llmBaseUrl", "llmApiKeyEnv"}
    assert "never from a workspace" in scoped.ignored["llmBaseUrl"]


def test_user_level_values_and_the_environment_are_used() -> None:
    user = {"llmBaseUrl": "http://localhost:8000/v1"}
    scoped = apply_scopes({"llmBaseUrl": "http://localhost:8000/v1"}, user, {})
    assert scoped.values["llm_base_url"] == "http://localhost:8000/v1" and not scoped.ignored
    env = {"llm_api_key_env": "VLLM_API_KEY"}
    scoped = apply_scopes({"llmApiKeyEnv": "VLLM_API_KEY"}, None, env)
    assert "llm_api_key_env" not in scoped.values and not scoped.ignored  # env applies itself
    # The defaults a client sends for every key are not a workspace override.
    assert not apply_scopes({"llmBaseUrl": None, "llmApiKeyEnv": "OPENAI_API_KEY"}, {}, {}).ignored


@pytest.mark.parametrize("name", ["HOME", "PATH", "AWS_SECRET", "OPENAI_API_KEY; rm", ""])
def test_key_variable_must_look_like_one(name: str) -> None:
    with pytest.raises(ValidationError, match="does not look like an API-key variable"):
        Settings(llm_api_key_env=name)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "vllm_key", "MY_LLM_API_KEY"])
def test_api_key_variables_are_accepted(name: str) -> None:
    assert Settings(llm_api_key_env=name).llm_api_key_env == name


def test_output_folders_stay_in_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "escape").symlink_to(tmp_path)
    inside = output_folder("trajectoriesDir", ".stitch/t", [ws], user_level=False)
    assert inside == ws / ".stitch" / "t"
    for bad in ("../../x", "/tmp/x", str(tmp_path / "other"), "escape/x", "~/x"):
        with pytest.raises(OutsideWorkspace, match="points outside the workspace"):
            output_folder("trajectoriesDir", bad, [ws], user_level=False)
    data = str(data_folder() / "runs")
    assert output_folder("trajectoriesDir", data, [ws], user_level=False) == Path(data).resolve()
    # Set in user settings: the user may write where they like.
    assert output_folder("trajectoriesDir", "../../x", [ws], user_level=True).name == "x"


def test_a_generated_file_never_follows_a_header_out_of_the_workspace(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "elsewhere"
    invoked = ws / "sub" / "cand.py"
    assert generated_file_folder(ws / "ref.py", invoked, [ws]) == ws
    assert generated_file_folder(outside / "ref.py", invoked, [ws]) == invoked.parent
    assert generated_file_folder(outside / "ref.py", invoked, []) == invoked.parent


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


async def _settings(client: StitchClient) -> dict[str, Any]:
    return dict((await debug_info(client))["settings"])


def _messages(client: StitchClient) -> list[str]:
    return [m.message for m in client.messages]


@pytest.mark.slow
async def test_server_ignores_workspace_endpoint_and_says_so_once(
    client: StitchClient, tmp_path: Path
) -> None:
    await initialize(client, tmp_path, settings=dict(ATTACKER), configuration=dict(ATTACKER))
    await wait_until(lambda: any("llmBaseUrl" in m for m in _messages(client)), 10)
    settings = await _settings(client)
    assert settings["llmBaseUrl"] is None
    assert settings["llmApiKeyEnv"] == "OPENAI_API_KEY"
    notices = [m for m in _messages(client) if "stitch.llmBaseUrl" in m]
    assert len(notices) == 1  # pulled twice (initialize and configuration), shown once
    logged = [m.message for m in client.log_messages if "stitch.llmBaseUrl" in m.message]
    assert len(logged) >= 2


@pytest.mark.slow
async def test_server_takes_the_endpoint_from_user_settings(
    client: StitchClient, tmp_path: Path
) -> None:
    user = {"llmBaseUrl": "http://localhost:8000/v1", "llmApiKeyEnv": "VLLM_API_KEY"}
    await initialize(client, tmp_path, user_settings=user, configuration=dict(ATTACKER))
    settings = await _settings(client)
    assert settings["llmBaseUrl"] == "http://localhost:8000/v1"
    assert settings["llmApiKeyEnv"] == "VLLM_API_KEY"


@pytest.mark.slow
async def test_pulled_user_settings_only_from_a_client_that_sent_them_at_start(
    client: StitchClient, tmp_path: Path
) -> None:
    configuration = {"userSettings": {"llmBaseUrl": "http://attacker.example/v1"}}
    await initialize(client, tmp_path, configuration=configuration)
    assert (await _settings(client))["llmBaseUrl"] is None


@pytest.mark.slow
async def test_generate_refuses_a_trajectories_folder_outside_the_workspace(
    client: StitchClient, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ref = ws / "m.py"
    ref.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.relu()\ndef get_inputs():\n    return [torch.randn(4)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    await initialize(client, ws, settings={"trajectoriesDir": "../../x"}, trusted=True)
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="stitch.generate", arguments=[ref.as_uri()])
    )
    assert not result["ok"] and "points outside the workspace" in result["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    assert sorted(p.name for p in ws.iterdir()) == ["m.py"]
