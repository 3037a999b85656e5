"""Routing this process's worker calls to a cluster: the CLI's `--ray` and the server's setting.

Every worker call goes through the default launcher (`stitch_lsp.workers.launch`); using a cluster
means swapping in a `RayLauncher` for as long as the cluster is in use, then putting the local
launcher back.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from stitch_lsp.cluster.session import ClusterSession, ClusterStatus, connect


def gpu_slots(status: ClusterStatus) -> list[str]:
    """One name per cluster GPU (`ray:0`, ...), for the schedulers that run one job per GPU.

    The names only count: which GPU a job gets is Ray's choice, and the result says where it ran.
    """
    return [f"ray:{i}" for i in range(int(status.gpus))]


@contextlib.contextmanager
def on_cluster(address: str | None, **local_options: Any) -> Iterator[ClusterSession]:
    """Run every worker call of this process on the cluster at `address` (None or "local": a
    Ray head started here, stopped afterwards)."""
    from stitch_lsp.cluster.executor import RayLauncher
    from stitch_lsp.workers.launch import set_default_launcher

    session = connect(address, **local_options)
    launcher = RayLauncher()
    previous = set_default_launcher(launcher)
    try:
        yield session
    finally:
        set_default_launcher(previous)
        launcher.kill_all()
        session.close()


def join_for_run(stack: contextlib.ExitStack, address: str, prog: str) -> list[str] | None:
    """The CLI's `--ray`: workers run on the cluster until `stack` closes. Returns its GPU slots,
    or None after saying on stderr why the cluster cannot be used."""
    from stitch_lsp.cluster.session import ClusterUnavailable

    try:
        session = stack.enter_context(on_cluster(address))
    except ClusterUnavailable as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    status = session.status()
    where = "a local Ray head" if session.started else f"the Ray cluster at {session.address}"
    print(f"Running on {where}: {status.nodes} node(s), {status.gpus:g} GPU(s).", file=sys.stderr)
    return gpu_slots(status)
