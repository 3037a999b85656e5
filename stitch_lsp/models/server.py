"""Custom messages between the language server and its editor clients."""

from __future__ import annotations

from typing import Literal

from stitch_lsp.models.base import WireModel

STATUS_METHOD = "stitch/status"
"""Server -> client notification that drives the status bar item."""


class ClusterInfo(WireModel):
    """The Ray cluster the server's jobs run on, as the status bar shows it."""

    address: str
    gpus: float
    free_gpus: float
    error: str | None = None


class StatusParams(WireModel):
    """`stitch/status`: idle, running on the GPU, the last result, or an error."""

    state: Literal["idle", "running", "done", "error"]
    message: str
    speedup: float | None = None
    cluster: ClusterInfo | None = None
