"""The base of every record that crosses a process boundary as JSON, and of every message the
editor reads (`WireModel`)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Record(BaseModel):
    """NaN and infinities are written as the strings "NaN" and "Infinity". pydantic's default
    writes them as null, which a required float field then refuses to read back: a candidate
    whose error was NaN made the verify worker's whole result unreadable. Strings also keep the
    payload valid JSON for an editor, which a bare NaN is not."""

    model_config = ConfigDict(ser_json_inf_nan="strings")


class WireModel(Record):
    """A message for the editor: snake_case in Python, camelCase on the wire (the client is
    TypeScript). Send it as `to_wire()`, never `model_dump()`: only the JSON text turns NaN and
    infinities into strings, and a bare NaN token makes the client's JSON.parse throw."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_wire(self, *, exclude_none: bool = False) -> dict[str, Any]:
        return wire_dict(self, exclude_none=exclude_none)


def wire_dict(model: BaseModel, *, exclude_none: bool = False) -> dict[str, Any]:
    """A record as an LSP payload: camelCase aliases, and through JSON text so that NaN and
    infinities arrive as strings (`model_dump(mode="json")` would keep them as floats, which
    the JSON writer then emits as bare NaN)."""
    text = model.model_dump_json(by_alias=True, exclude_none=exclude_none)
    data: dict[str, Any] = json.loads(text)
    return data
