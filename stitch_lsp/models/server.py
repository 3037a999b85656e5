"""Custom messages between the language server and its editor clients."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from stitch_lsp.models.base import Record

STATUS_METHOD = "stitch/status"
"""Server -> client notification that drives the status bar item."""


class ClusterInfo(Record):
    """The Ray cluster the server's jobs run on, as the status bar shows it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    address: str
    gpus: float
    free_gpus: float
    error: str | None = None


class StatusParams(Record):
    """`stitch/status`: idle, running on the GPU, the last result, or an error."""

    state: Literal["idle", "running", "done", "error"]
    message: str
    speedup: float | None = None
    cluster: ClusterInfo | None = None
