"""A workspace cannot choose a program the server runs or a place it loads code from.

`pythonForWorkers` (probed at `initialized`), `ncuPath` (NVIDIA's report reader is imported from
beside it) and `sandbox` are user-level only: a workspace's value is ignored whatever the trust,
and the planted program never runs. The same program given at user level does run, which shows
the tests would see it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pydantic import ValidationError

from stitch_lsp.config import USER_LEVEL_ONLY, Settings
from stitch_lsp.server.scopes import apply_scopes
from tests.server.lsp_client import SERVER, StitchClient, debug_info, initialize, wait_until

REPO = Path(__file__).resolve().parents[2]


def _plant_python(folder: Path, marker: Path) -> Path:
    """An executable that leaves `marker` behind when anything runs it."""
    exe = folder / "bin" / "python"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!/bin/sh\necho ran > '{marker}'\nexit 0\n")
    exe.chmod(0o755)
    return exe


def _plant_ncu(folder: Path, marker: Path) -> Path:
    """An `ncu` with an `extras/python/ncu_report.py` beside it that leaves `marker` when
    imported (and an ncu that leaves it when run)."""
    ncu = folder / "tools" / "ncu"
    reader = folder / "tools" / "extras" / "python" / "ncu_report.py"
    reader.parent.mkdir(parents=True, exist_ok=True)
    ncu.write_text(f"#!/bin/sh\necho ran > '{marker}'\n")
    ncu.chmod(0o755)
    reader.write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    return ncu


def test_every_program_or_destination_setting_is_user_level_only() -> None:
    assert {"python_for_workers", "ncu_path", "sandbox", "llm_base_url", "cluster"} <= set(
        USER_LEVEL_ONLY
    )
    hostile = {"pythonForWorkers": "/ws/bin/python", "ncuPath": "/ws/tools/ncu", "sandbox": "none"}
    scoped = apply_scopes({**hostile, "trials": 3}, None, {})
    assert scoped.values == {"trials": 3}
    assert set(scoped.ignored) == set(hostile)
    assert "names the program that runs the workers" in scoped.ignored["pythonForWorkers"]
    assert "confined" in scoped.ignored["sandbox"]
    # The same values from user settings are used.
    scoped = apply_scopes(hostile, hostile, {})
    assert scoped.values == {
        "python_for_workers": "/ws/bin/python",
        "ncu_path": "/ws/tools/ncu",
        "sandbox": "none",
    }
    assert not scoped.ignored


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


def _notices(client: StitchClient) -> list[str]:
    return [m.message for m in client.messages]


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [True, False])
async def test_workspace_programs_are_ignored_and_never_run(
    client: StitchClient, tmp_path: Path, trusted: bool
) -> None:
    marker = tmp_path / "ran"
    hostile: dict[str, Any] = {
        "pythonForWorkers": str(_plant_python(tmp_path, marker)),
        "ncuPath": str(_plant_ncu(tmp_path, marker)),
        "sandbox": "none",
    }
    await initialize(
        client, tmp_path, settings=dict(hostile), configuration=dict(hostile), trusted=trusted
    )
    await wait_until(lambda: any("stitch.sandbox" in m for m in _notices(client)), 10)
    settings = (await debug_info(client))["settings"]
    assert settings["pythonForWorkers"] is None
    assert settings["ncuPath"] == "ncu"
    assert settings["sandbox"] == "auto"
    for key in hostile:
        assert any(f"stitch.{key}" in m and "never from a workspace" in m for m in _notices(client))
    assert not marker.exists(), "the torch probe ran the workspace's pythonForWorkers"


@pytest.mark.slow
async def test_a_user_level_python_for_workers_is_the_one_probed(
    client: StitchClient, tmp_path: Path
) -> None:
    """The control for the test above: the probe at `initialized` does run the workers'
    Python when the user chose it."""
    marker = tmp_path / "ran"
    python = str(_plant_python(tmp_path / "user", marker))
    await initialize(client, tmp_path, user_settings={"pythonForWorkers": python})
    assert (await debug_info(client))["settings"]["pythonForWorkers"] == python
    assert marker.exists()


@pytest.mark.slow
async def test_serve_python_for_workers_is_user_level(tmp_path: Path) -> None:
    """`serve --python-for-workers` (the command line of whoever started the server) is the
    one probed, and a workspace value does not replace it."""
    from tests.server.lsp_client import SERVER_COMMAND, make_client

    marker, hostile_marker = tmp_path / "ran", tmp_path / "hostile-ran"
    python = str(_plant_python(tmp_path / "user", marker))
    hostile = str(_plant_python(tmp_path / "ws", hostile_marker))
    client = make_client()
    await client.start_io(*SERVER_COMMAND, "--python-for-workers", python)
    try:
        await initialize(client, tmp_path, settings={"pythonForWorkers": hostile})
        assert (await debug_info(client))["settings"]["pythonForWorkers"] == python
    finally:
        await client.shutdown_session()
    assert marker.exists() and not hostile_marker.exists()


@pytest.mark.slow
async def test_an_untrusted_show_profile_never_imports_a_reader_beside_a_workspace_ncu(
    client: StitchClient, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    ncu = _plant_ncu(tmp_path, marker)
    report = tmp_path / "k.ncu-rep"
    report.write_bytes(b"not a report")
    (tmp_path / "k.py").write_text("x = 1\n")
    await initialize(client, tmp_path, settings={"ncuPath": str(ncu)}, trusted=False)
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            command="stitch.showProfile",
            arguments=[{"uri": (tmp_path / "k.py").as_uri(), "report": str(report)}],
        )
    )
    assert not marker.exists(), "ncu_report.py from beside the workspace's ncu was imported"


_HIDE_WHEEL = """
import importlib.machinery, sys
class HideWheel:
    # Hides an installed ncu-report wheel, so the folders beside ncu are searched.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "ncu_report":
            return None
        elsewhere = [p for p in sys.path if "-packages" not in p]
        spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
        if spec is None:
            raise ImportError("the wheel is hidden")
        return spec
sys.meta_path.insert(0, HideWheel)
"""


def _reader_imports(cwd: Path, ncu_path: str, path_env: str | None = None) -> str:
    """Run `ncu_report_module(ncu_path)` in a fresh interpreter in `cwd`, as on a host without
    the ncu-report wheel: the file it imported, or `refused: ...`."""
    code = _HIDE_WHEEL + (
        "from stitch_lsp.profile.worker.report import ReportError, ncu_report_module\n"
        "try:\n"
        "    print(ncu_report_module(sys.argv[1]).__file__)\n"
        "except ReportError as exc:\n"
        "    print('refused:', exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("STITCH_NCU_PATH", None)
    if path_env is not None:
        env["PATH"] = path_env
    out = subprocess.run(
        [sys.executable, "-c", code, ncu_path],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_the_report_reader_follows_only_an_absolute_ncu(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    ncu = _plant_ncu(tmp_path, marker)
    # Relative to the working folder (a project's): never followed.
    assert _reader_imports(tmp_path, "tools/ncu").startswith("refused:")
    assert _reader_imports(tmp_path, "./tools/ncu").startswith("refused:")
    # A relative PATH entry finds the project's `ncu` for a bare name: not followed either.
    path = os.pathsep.join(["tools", os.environ.get("PATH", "")])
    assert _reader_imports(tmp_path, "ncu", path_env=path).startswith("refused:")
    assert not marker.exists()
    # The user's own absolute path is followed (the reader found there is imported).
    assert _reader_imports(tmp_path, str(ncu)) == str(ncu.parent / "extras/python/ncu_report.py")
    assert marker.read_text() == "imported"


@pytest.mark.parametrize(
    "name", ["--section-folder=/ws/sections", "-h", "a b", "x\n", "", "x\x00", "y" * 200]
)
def test_a_section_name_cannot_be_an_ncu_option(name: str) -> None:
    """Each name follows `--section` on ncu's command line: a workspace's `ncuSections` must
    not smuggle in an option (a section folder is Python that ncu runs)."""
    with pytest.raises(ValidationError, match="not an Nsight Compute section name"):
        Settings(ncu_sections=["SpeedOfLight", name])
    assert (
        Settings(ncu_sections=["SpeedOfLight", "regex:Memory.*"]).ncu_sections[1]
        == "regex:Memory.*"
    )
