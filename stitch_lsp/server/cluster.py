"""The server's link to a Ray cluster (the `cluster` setting).

When `cluster` is set and the workspace is trusted, the server connects, runs every worker call
there (the scheduler gets one queue per cluster GPU, so a machine without a GPU gets full
verification), and tells the status bar the cluster and its free GPUs. In an untrusted workspace
it never connects: nothing is sent anywhere. Blocking calls (connecting, asking for resources)
run in the server's executor; `ray` is imported only once a cluster is set.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class ClusterLink:
    """One cluster connection for the life of the server, replaced when the setting changes."""

    def __init__(self) -> None:
        self.address: str | None = None
        self.status: Any = None  # ClusterStatus of the last look, None when not connected
        self.launcher: Any = None  # the RayLauncher while connected
        self._session: Any = None
        self._previous: Any = None
        self._lock = threading.Lock()

    @property
    def connected(self) -> bool:
        return self._session is not None

    def use(self, address: str) -> list[str]:
        """Connect to `address` (if not already) and return the scheduler's GPU slots.

        Raises ClusterUnavailable (Ray missing, cluster unreachable) with a message for the user.
        """
        from stitch_lsp.cluster.executor import RayLauncher
        from stitch_lsp.cluster.session import connect
        from stitch_lsp.cluster.use import gpu_slots
        from stitch_lsp.workers.launch import set_default_launcher

        with self._lock:
            if self._session is None or self.address != address:
                self._leave()
                self._session = connect(address)
                self.address = address
                self.launcher = RayLauncher()
                self._previous = set_default_launcher(self.launcher)
            self.status = self._session.status()
            return gpu_slots(self.status)

    def refresh(self) -> Any:
        """Look at the cluster's free GPUs again; None when not connected."""
        with self._lock:
            if self._session is None:
                return None
            self.status = self._session.status()
            return self.status

    def leave(self) -> None:
        with self._lock:
            self._leave()

    def kill_all(self) -> None:
        launcher = self.launcher
        if launcher is not None:
            try:
                launcher.kill_all()
            except Exception:
                log.exception("could not stop the cluster's actors")

    def _leave(self) -> None:
        if self._session is None:
            return
        from stitch_lsp.workers.launch import set_default_launcher

        self.kill_all()
        if self._previous is not None:
            set_default_launcher(self._previous)
        try:
            self._session.close()
        except Exception:
            log.exception("leaving the cluster at %s", self.address)
        self._session = self.launcher = self._previous = self.status = None
        self.address = None

    def wire(self) -> dict[str, Any] | None:
        """What `stitch/status` carries about the cluster (camelCase), or None."""
        s = self.status
        if s is None:
            return None
        out: dict[str, Any] = {"address": s.address, "gpus": s.gpus, "freeGpus": s.free_gpus}
        if s.error:
            out["error"] = s.error
        return out
