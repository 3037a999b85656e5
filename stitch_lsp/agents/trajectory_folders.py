"""Where `export-trajectories` looks when it is given no folder.

A CLI run writes its records beside its reference (`examples/.stitch/trajectories` for
`generate examples/x.py`), the editor under its workspace root. Run from the project root, an
export without a folder should still find them all, so it gathers every trajectories folder
below the current one, not only the one at its top.
"""

from __future__ import annotations

import os
from pathlib import Path

from stitch_lsp.analysis.check import SKIP_DIRS


def trajectory_folders(root: Path, setting: str) -> list[Path]:
    """The trajectory folders an export without DIR reads: `setting` itself when it is
    absolute; else every `<folder>/<setting>` at or below `root` (virtualenvs, node_modules and
    hidden folders other than the setting's own are not searched)."""
    relative = Path(setting).expanduser()
    if relative.is_absolute():
        return [relative] if relative.is_dir() else []
    first = relative.parts[0] if relative.parts else ""
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        holds = (here / relative).is_dir()
        if holds:
            found.append(here / relative)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in SKIP_DIRS
            and not (d.startswith(".") and d != first)
            and not (here / d / "pyvenv.cfg").exists()
            and not (holds and d == first)  # records are read recursively: not twice
        )
    return found
