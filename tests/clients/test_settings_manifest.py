"""The extension declares every server setting with the server's own default and type.

The server's Settings model is the source of truth; package.json's `contributes.configuration`
must follow it, or users would see defaults in VS Code that the server does not use.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import pytest
from pydantic.alias_generators import to_camel

from stitch_lsp.config import USER_LEVEL_ONLY, Settings

MANIFEST = Path(__file__).resolve().parents[2] / "client-vscode" / "package.json"
CLIENT_ONLY = {"python.interpreter", "trace.server"}


def declared() -> dict[str, dict]:
    props = json.loads(MANIFEST.read_text())["contributes"]["configuration"]["properties"]
    return {key.removeprefix("stitch."): schema for key, schema in props.items()}


def json_types(annotation: object) -> set[str]:
    """The JSON schema types a Python annotation allows."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(json_types(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {"string"}
    if origin in (list, tuple):
        return {"array"}
    return {
        bool: {"boolean"},
        int: {"integer"},
        float: {"number"},
        str: {"string"},
        type(None): {"null"},
    }[annotation]


def test_every_server_setting_is_declared_and_nothing_else() -> None:
    server_keys = {to_camel(name) for name in Settings.model_fields}
    assert set(declared()) - CLIENT_ONLY == server_keys


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_setting_matches_the_server(name: str) -> None:
    field = Settings.model_fields[name]
    schema = declared()[to_camel(name)]
    assert schema.get("description") or schema.get("markdownDescription"), f"{name}: no description"
    default = field.get_default(call_default_factory=True)
    assert schema["default"] == default, (
        f"{name}: default {schema['default']!r} != server {default!r}"
    )
    declared_types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    allowed = json_types(field.annotation)
    for t in declared_types:
        # JSON "integer" values are valid where the server takes a float.
        assert t in allowed or (t == "integer" and "number" in allowed), (
            f"{name}: type {t} vs {allowed}"
        )
    if typing.get_origin(field.annotation) is typing.Literal:
        assert schema["enum"] == list(typing.get_args(field.annotation))


def test_client_only_settings_are_declared() -> None:
    d = declared()
    assert d["python.interpreter"]["type"] == "array"
    assert d["trace.server"]["enum"] == ["off", "messages", "verbose"]


def test_user_level_only_settings_are_restricted_and_sent_as_user_settings() -> None:
    """Each setting the server takes only from user level must be kept out of untrusted
    workspaces by VS Code, scoped so a workspace cannot set it, and sent in `userSettings`
    (or the user's own value would be dropped as well)."""
    manifest = json.loads(MANIFEST.read_text())
    restricted = set(manifest["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"])
    settings_ts = (MANIFEST.parent / "src" / "settings.ts").read_text()
    keys_block = settings_ts.split("USER_LEVEL_KEYS: readonly string[] = [", 1)[1].split("]", 1)[0]
    sent = {part.strip().strip('"') for part in keys_block.split(",") if part.strip()}
    for name in USER_LEVEL_ONLY:
        key = to_camel(name)
        assert f"stitch.{key}" in restricted, key
        assert declared()[key].get("scope") in ("application", "machine"), key
        assert key in sent, key
