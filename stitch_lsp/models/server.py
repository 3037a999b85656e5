"""Custom messages between the language server and its editor clients."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

STATUS_METHOD = "stitch/status"
"""Server -> client notification that drives the status bar item."""


class StatusParams(BaseModel):
    """`stitch/status`: idle, running on the GPU, the last result, or an error."""

    state: Literal["idle", "running", "done", "error"]
    message: str
    speedup: float | None = None
