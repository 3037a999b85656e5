"""The seam between the torch-free server and the processes that touch torch or the GPU.

Every worker (verify, profile, planner, builtin generation, and the profiled program under ncu)
is started through one launcher, `launch.LocalLauncher`, or another implementation of the
`launch.WorkerLauncher` interface (a remote executor). The launcher sends one pydantic request
in and reads one pydantic result out, runs the worker in its own process group with a timeout
and a cancel event, keeps the tail of its output, and turns a crash, a timeout or a missing
result into one typed `WorkerError`.

Workers start isolated: `python -E -B [-P] -c <bootstrap>` puts neither the working folder nor
`PYTHONPATH` on `sys.path` (so a workspace file named `torch.py` or `ncu_report.py` is never
imported by accident); the bootstrap loads this very copy of `stitch_lsp` by path, adds the
absolute `PYTHONPATH` entries of the server's own environment, and calls `<module>.main(argv)`.

Where each module runs:
- worker side only (may import torch, ncu_report or the user's code): every module under a
  `worker/` package named in `WORKER_PACKAGES`;
- everything else under `stitch_lsp` is server side and must import without torch
  (tests/server/test_no_torch.py imports all of it in a fresh interpreter to prove it).
"""

from __future__ import annotations

WORKER_ENTRY_POINTS: dict[str, str] = {
    "verify": "stitch_lsp.verify.worker.main",
    "profile": "stitch_lsp.profile.worker.main",
    "profile-target": "stitch_lsp.profile.worker.target",
    "planner": "stitch_lsp.agents.worker.main",
    "builtin": "stitch_lsp.compiler.worker.main",
}
"""Worker kind -> the module the launcher runs (each defines `main(argv) -> int`)."""

WORKER_PACKAGES: tuple[str, ...] = (
    "stitch_lsp.verify.worker",
    "stitch_lsp.profile.worker",
    "stitch_lsp.agents.worker",
    "stitch_lsp.compiler.worker",
)
"""The worker side, as packages: a module may import torch, ncu_report or a candidate's code
only if it lives in one of these `worker/` folders. Every worker kind's entry point is the
`main` module of one of them."""


def runs_in_worker(module: str) -> bool:
    """Whether `module` belongs to the worker side of the seam."""
    return any(module == p or module.startswith(p + ".") for p in WORKER_PACKAGES)
