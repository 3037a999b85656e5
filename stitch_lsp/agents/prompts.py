"""Render the prompt templates shipped in `stitch_lsp/prompts/` (string.Template, `$name`)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def template(name: str) -> Template:
    text = resources.files("stitch_lsp.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text)


def render(name: str, **values: object) -> str:
    """Fill template `name`; a missing value is a bug, so it raises KeyError."""
    return template(name).substitute({k: str(v) for k, v in values.items()}).strip() + "\n"
