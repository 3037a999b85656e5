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
- worker side only (may import torch, ncu_report or the user's code): the modules named in
  `WORKER_MODULES` and everything under the packages in `WORKER_PACKAGES`;
- everything else under `stitch_lsp` is server side and must import without torch
  (tests/server/test_no_torch.py imports all of it in a fresh interpreter to prove it).
"""

from __future__ import annotations

WORKER_ENTRY_POINTS: dict[str, str] = {
    "verify": "stitch_lsp.verify.worker",
    "profile": "stitch_lsp.profile.worker",
    "profile-target": "stitch_lsp.profile.target",
    "planner": "stitch_lsp.agents.planner_worker",
    "builtin": "stitch_lsp.agents.builtin.worker",
}
"""Worker kind -> the module the launcher runs (each defines `main(argv) -> int`)."""

WORKER_MODULES: frozenset[str] = frozenset(
    {
        *WORKER_ENTRY_POINTS.values(),
        "stitch_lsp.verify.gpu",
        "stitch_lsp.verify.correctness",
        "stitch_lsp.verify.exploits",
        "stitch_lsp.verify.timing",
        "stitch_lsp.verify.loading",
        "stitch_lsp.verify.activity",
        "stitch_lsp.verify.precision",
        "stitch_lsp.profile.report",
        "stitch_lsp.agents.builtin.capture",
        "stitch_lsp.agents.builtin.capture_aten",
        "stitch_lsp.agents.builtin.capture_fx",
        "stitch_lsp.agents.builtin.capture_leaves",
        "stitch_lsp.agents.builtin.spelling",
        "stitch_lsp.agents.builtin.recurrent_capture",
        "stitch_lsp.agents.builtin.generate",
    }
)
"""Modules imported only inside workers: torch, ncu_report or a candidate's code live there."""

WORKER_PACKAGES: tuple[str, ...] = ()
"""Packages whose every module runs in workers only (none yet)."""


def runs_in_worker(module: str) -> bool:
    """Whether `module` belongs to the worker side of the seam."""
    return module in WORKER_MODULES or any(
        module == p or module.startswith(p + ".") for p in WORKER_PACKAGES
    )
