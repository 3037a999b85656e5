"""Which settings a workspace may set, and where the server may write.

A workspace's own settings (`.vscode/settings.json`, a project-local editor config) are written
by whoever wrote the project. So:

- `llmBaseUrl`, `llmApiKeyEnv` and `cluster` decide where code and the API key are sent;
  `pythonForWorkers` and `ncuPath` name programs the server runs (the workers' Python is
  probed at `initialized`; NVIDIA's report reader is imported from beside ncu); `sandbox`
  decides whether candidate code is confined. These (config.USER_LEVEL_ONLY) come only from
  the server's own environment (`STITCH_LLM_BASE_URL`), its command line, or `userSettings`,
  values the editor vouches come from user-level settings (the VS Code client reads them with
  `inspect().globalValue`), whatever the workspace's trust. The same keys in ordinary LSP
  settings are ignored, with a warning in the log and a notice once.
- Output folders (`trajectoriesDir`, and where a generated file goes) stay inside the workspace
  folders or the user's data folder, unless the value itself is user-level.

`userSettings` travels in initializationOptions; a client that sends it there may also send an
updated copy inside the pulled `stitch` section (the VS Code client's configuration middleware
does), and only such a client: a workspace could otherwise inject it as an undeclared setting.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic.alias_generators import to_camel

from stitch_lsp.config import USER_LEVEL_ONLY, Settings

USER_SETTINGS_KEY = "userSettings"
_WHY: dict[str, str] = {
    "llm_base_url": "decides where code and the API key are sent",
    "llm_api_key_env": "decides which secret is sent to the endpoint",
    "cluster": "decides where code is sent",
    "python_for_workers": "names the program that runs the workers",
    "ncu_path": "names the program that profiles (and where its report reader is loaded from)",
    "sandbox": "decides whether candidate code is confined",
}
"""Why each USER_LEVEL_ONLY setting is one, in the sentence that says its value was ignored."""


@dataclass
class ScopedValues:
    """LSP settings after the scope rules: what to use, and what was refused and why."""

    values: dict[str, Any]
    ignored: dict[str, str] = field(default_factory=dict)
    """camelCase key -> the sentence that says why its value was not used."""


_NAMES = {
    **{to_camel(n): n for n in Settings.model_fields},
    **{n: n for n in Settings.model_fields},
}


def snake_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings keys as the model's field names (the client sends camelCase)."""
    return {_NAMES.get(k, k): v for k, v in values.items()}


def apply_scopes(
    lsp_values: Mapping[str, Any],
    user_values: Mapping[str, Any] | None,
    environment: Mapping[str, Any],
) -> ScopedValues:
    """Drop workspace-level values of user-level-only settings; put the vouched user-level ones
    in their place. `environment` holds the server's own STITCH_* values."""
    values = snake_keys(lsp_values)
    user = snake_keys(user_values or {})
    out = ScopedValues({k: v for k, v in values.items() if k not in USER_LEVEL_ONLY})
    for key in USER_LEVEL_ONLY:
        default = Settings.model_fields[key].get_default(call_default_factory=True)
        allowed = user.get(key, environment.get(key, default))
        if key in user:
            out.values[key] = user[key]
        if key in values and values[key] != allowed:
            name = to_camel(key)
            why = _WHY.get(key, "is user-level only")
            out.ignored[name] = (
                f"stitch.{name} = {values[key]!r} was ignored: it {why}, so it is taken only "
                "from user settings (or the server's environment), never from a workspace; "
                f"using {allowed!r}"
            )
    return out


def user_level_keys(
    lsp_values: Mapping[str, Any], user_values: Mapping[str, Any] | None, settings: Settings
) -> frozenset[str]:
    """Settings whose value in `settings` the user set at user level (or the server's own
    environment and defaults gave): the workspace did not choose them."""
    values = snake_keys(lsp_values)
    user = snake_keys(user_values or {})
    keys = set(USER_LEVEL_ONLY)
    for name in Settings.model_fields:
        if name not in values or (name in user and user[name] == getattr(settings, name)):
            keys.add(name)
    return frozenset(keys)


def data_folder() -> Path:
    """The user's data folder for stitch-lsp (XDG_DATA_HOME, else ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "stitch-lsp"


class OutsideWorkspace(ValueError):
    """A workspace-level output location that points outside the workspace."""


def within(path: Path, roots: Iterable[Path]) -> bool:
    """Whether `path` (resolved, symlinks followed) lies inside one of `roots`."""
    real = path.resolve()
    for root in roots:
        base = root.resolve()
        if real == base or base in real.parents:
            return True
    return False


def output_folder(setting: str, value: str, roots: Sequence[Path], *, user_level: bool) -> Path:
    """Where an output-folder setting points (relative to the first root), symlinks resolved
    before any check. A value the workspace chose must stay inside `roots` or the user's data
    folder; a user-level value may point anywhere, except through a symlink in the workspace."""
    if not roots:
        raise OutsideWorkspace(f"stitch.{setting}: no workspace folder to write into")
    raw = Path(value).expanduser()
    lexical = Path(os.path.normpath(raw if raw.is_absolute() else roots[0].absolute() / raw))
    path = lexical.resolve()
    if user_level:
        # The user may name any folder, `..` included; but a folder named inside the workspace
        # stays inside it: a symlinked `.stitch` committed there does not lead the output out.
        inside_by_name = lexical == roots[0].absolute() or roots[0].absolute() in lexical.parents
        if not inside_by_name or within(path, [roots[0]]):
            return path
        raise OutsideWorkspace(
            f"stitch.{setting} = {value!r} leads outside the workspace ({path}) through a "
            f"symlink in {roots[0]}; nothing is written through it. Remove the link, or set "
            "an absolute folder in your user settings."
        )
    if within(path, [*roots, data_folder()]):
        return path
    raise OutsideWorkspace(
        f"stitch.{setting} = {value!r} points outside the workspace ({path}); a workspace "
        f"setting may only write inside the workspace or {data_folder()}. Set it in your user "
        "settings to write elsewhere."
    )


def generated_file_folder(reference: Path, invoked: Path, roots: Sequence[Path]) -> Path:
    """Where a generated file goes, resolved: beside its reference, unless the reference (named
    by an Optimize file's header) lies outside the workspace; then beside the file the command
    ran on. Either must lie inside `roots` once symlinks are followed (OutsideWorkspace if
    neither does): a symlinked folder in the workspace does not lead the output out of it."""
    if not roots:
        return invoked.parent
    for folder in (reference.parent, invoked.parent):
        if within(folder, roots):
            return folder.resolve()
    raise OutsideWorkspace(
        f"{invoked.parent} leads outside the workspace ({invoked.parent.resolve()}) through a "
        "symlink; the generated file would be written there, so nothing was written"
    )
