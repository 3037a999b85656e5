"""Where a generated file goes and how it starts: a free name next to the reference, a header line.

Nothing the user wrote is ever overwritten: names are probed, and the file is created with
O_EXCL.
"""

from __future__ import annotations

import os
from pathlib import Path

from stitch_lsp import candidate_header
from stitch_lsp.candidate_header import HeaderError

__all__ = ["HeaderError", "free_name", "header_line", "with_header", "write_new"]


def free_name(
    reference: Path,
    taken: set[str] | None = None,
    folder: Path | None = None,
    suffix: str = "_stitch",
) -> Path:
    """`<stem>_stitch.py`, then `<stem>_stitch_2.py`, ... (or another `suffix`): the first that
    does not exist, in `folder` (default: beside the reference). `taken` holds names also in
    use."""
    taken = taken or set()
    stem = reference.stem
    where = folder or reference.parent
    for n in range(1, 10_000):
        name = f"{stem}{suffix}.py" if n == 1 else f"{stem}{suffix}_{n}.py"
        candidate = where / name
        # lexists: a dangling symlink is taken too (O_EXCL would refuse it at the end)
        if not os.path.lexists(candidate) and name not in taken:
            return candidate
    raise FileExistsError(f"no free output name in {where}")


def header_line(reference: Path, out: Path) -> str:
    """The header naming `reference` relative to `out`'s folder; HeaderError if no header can."""
    rel = candidate_header.relative_reference(reference, out.resolve().parent)
    return candidate_header.header_line(rel)


def with_header(code: str, reference: Path, out: Path) -> str:
    """The file's text: our header first (replacing one the Coder may have written)."""
    lines = code.splitlines()
    if lines and candidate_header.is_header_line(lines[0]):
        lines = lines[1:]
    return "\n".join([header_line(reference, out), *lines]).rstrip("\n") + "\n"


def write_new(path: Path, text: str) -> None:
    """Create `path` with `text`; FileExistsError if anything is already there (a dangling
    symlink included: O_EXCL with O_NOFOLLOW never writes through a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
