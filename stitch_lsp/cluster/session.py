"""Connecting to a Ray cluster, or starting a local one for one run, and what it has free.

`--ray ADDRESS` connects to a running cluster (`ray://head:10001` through Ray Client, or
`head:6379` from a machine inside the cluster); `--ray` alone starts a Ray head on this machine
for the run and stops it afterwards. `ray` is imported here and only here on the client side.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from stitch_lsp.cluster import RAY_MISSING
from stitch_lsp.models.base import Record

log = logging.getLogger(__name__)

NAMESPACE = "stitch-lsp"
LOCAL = "local"
LOCAL_OBJECT_STORE_BYTES = 512 * 1024 * 1024
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (despite its name, on every OS): "0" keeps every Ray address on 127.0.0.1."""
"""The address that means: start a Ray head on this machine for the run."""


class ClusterUnavailable(RuntimeError):
    """Ray is missing, or the cluster cannot be reached: the message says which and what to do."""


def require_ray() -> ModuleType:
    """The `ray` module, or a ClusterUnavailable that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ClusterUnavailable(RAY_MISSING) from exc


class ClusterStatus(Record):
    """What the status bar and the CLI say about the cluster."""

    address: str
    nodes: int = 0
    gpus: float = 0.0
    free_gpus: float = 0.0
    cpus: float = 0.0
    error: str | None = None


@dataclass
class ClusterSession:
    """This process's connection to one cluster. `started` when it started a local head, which
    `close` then stops."""

    address: str
    started: bool

    def status(self) -> ClusterStatus:
        ray = require_ray()
        try:
            total = ray.cluster_resources()
            free = ray.available_resources()
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        except Exception as exc:  # a cluster that went away answers with a reason, not a crash
            return ClusterStatus(address=self.address, error=f"{type(exc).__name__}: {exc}")
        return ClusterStatus(
            address=self.address,
            nodes=nodes,
            gpus=float(total.get("GPU", 0.0)),
            free_gpus=float(free.get("GPU", 0.0)),
            cpus=float(total.get("CPU", 0.0)),
        )

    def close(self) -> None:
        ray = require_ray()
        if ray.is_initialized():
            ray.shutdown()


def connect(address: str | None, **local_options: Any) -> ClusterSession:
    """Join the cluster at `address`; None or "local": start a local head for this process.

    `local_options` go to `ray.init` when a local head is started (tests give `num_gpus` and
    `num_cpus`). Joining a cluster this process already joined returns the same session.
    """
    want = address if address and address != LOCAL else None
    if want is None:
        # A head for one run on this machine serves this machine only: every Ray process binds
        # to and announces the loopback address (read when `ray` is imported, and by the
        # processes it starts).
        os.environ.setdefault(LOOPBACK_ENV, "0")
    ray = require_ray()
    if ray.is_initialized():
        return ClusterSession(address=want or LOCAL, started=False)
    kwargs: dict[str, Any] = {
        "namespace": NAMESPACE,
        "log_to_driver": False,
        "configure_logging": False,
    }
    # Ray reports usage statistics to its authors by default; a run of ours sends nothing.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        if want is None:
            # Jobs carry source files only: a small object store spares /dev/shm.
            options = {"object_store_memory": LOCAL_OBJECT_STORE_BYTES, **local_options}
            ray.init(
                address="local",
                include_dashboard=False,
                runtime_env={"env_vars": _local_env()},
                **kwargs,
                **options,
            )
        else:
            ray.init(address=want, **kwargs)
    except Exception as exc:
        raise ClusterUnavailable(
            f"cannot reach the Ray cluster at {want or 'a new local head'}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return ClusterSession(address=want or LOCAL, started=want is None)


def _local_env() -> dict[str, str]:
    """What a local head's workers need from this environment: the same import path."""
    keep = ("PYTHONPATH", "STITCH_CLUSTER_CACHE", "STITCH_CACHE_DIR", "PATH")
    return {k: os.environ[k] for k in keep if k in os.environ}


@contextlib.contextmanager
def cluster(address: str | None, **local_options: Any) -> Iterator[ClusterSession]:
    """A session for the length of a run: a local head started here is stopped after it, and a
    connection to a running cluster is closed (the cluster goes on)."""
    session = connect(address, **local_options)
    try:
        yield session
    finally:
        session.close()
