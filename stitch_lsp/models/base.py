"""The base of every record that crosses a process boundary as JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """NaN and infinities are written as the strings "NaN" and "Infinity". pydantic's default
    writes them as null, which a required float field then refuses to read back: a candidate
    whose error was NaN made the verify worker's whole result unreadable. Strings also keep the
    payload valid JSON for an editor, which a bare NaN is not."""

    model_config = ConfigDict(ser_json_inf_nan="strings")


def wire_dict(model: BaseModel) -> dict[str, Any]:
    """A record as an LSP payload: camelCase aliases, and through JSON text so that NaN and
    infinities arrive as strings (`model_dump(mode="json")` would keep them as floats, which
    the JSON writer then emits as bare NaN)."""
    data: dict[str, Any] = json.loads(model.model_dump_json(by_alias=True))
    return data
