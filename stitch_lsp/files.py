"""Reading files that a workspace names: only regular files, never more than a cap.

A path in a `# stitch-lsp: reference=` header, a folder given to `check` or a report's source
list comes from the workspace, and a workspace can hold anything: a FIFO (opening and reading it
blocks until a writer appears, which may be never), `/dev/zero` (reads without end) or a
multi-gigabyte file. So every such read opens without blocking, checks that the file is a
regular file, and reads at most a cap. Binary content is recognised here too, so the parser is
never fed a megabyte of noise (tree-sitter's error recovery on it took half a minute).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

DEFAULT_MAX_BYTES = 5_000_000
# Share of undecodable characters above which a file is binary, not text with a stray byte.
_BAD_UTF8_SHARE = 0.05
_BAD_UTF8_MIN = 16


class UnreadableFile(OSError):
    """A path that is not a regular file, is over the size cap or leads outside its folder;
    `reason` says which, as a predicate of the file's name ("is not a regular file (a FIFO)")."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{display_path(path)} {reason}")
        self.path = Path(path)
        self.reason = reason


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def human_size(n: int) -> str:
    """A byte count as people read it: `1.2 GB`, `16 MiB` (powers of two print as such)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0 and n // size < 1024:
            return f"{n // size} {unit}"
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _resolved(path: Path | str, inside: Sequence[Path | str] | None) -> str:
    """`path` with every symlink followed; UnreadableFile when that leaves `inside`."""
    try:
        real = os.path.realpath(path, strict=True)
    except RuntimeError as exc:  # Python < 3.13 on a symlink loop
        raise OSError(errno.ELOOP, "a symlink loop", os.fspath(path)) from exc
    if inside is not None and not is_inside(real, inside):
        folders = ", ".join(display_path(f) for f in inside) or "no folder"
        raise UnreadableFile(
            path, f"leads outside {folders} (to {display_path(real)}) once its links are followed"
        )
    return real


def is_inside(path: Path | str, folders: Sequence[Path | str]) -> bool:
    """Whether `path` (already resolved) is one of `folders` (resolved here) or below one."""
    real = os.fspath(path)
    for folder in folders:
        base = os.path.realpath(folder)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def _open_regular_fd(path: Path | str, inside: Sequence[Path | str] | None) -> tuple[int, int]:
    """(fd, size) of a regular file: the resolved path is opened without following a link and
    without blocking, so a FIFO, device or socket is refused, never waited on."""
    real = _resolved(path, inside)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(real, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"is not a regular file ({kind_of(st.st_mode)}); not read")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def over_limit(size: int, max_bytes: int) -> str:
    return f"is {human_size(size)}, over the {human_size(max_bytes)} limit; not read"


def read_regular(
    path: Path | str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    inside: Sequence[Path | str] | None = None,
) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, found by following its symlinks
    and, with `inside`, only when it lies within one of those folders.

    Raises UnreadableFile for a FIFO, device, socket or folder, a file over the cap (or one
    that grows past it while read: never more than `max_bytes + 1` bytes are read) or outside
    `inside`, and OSError for the rest (missing, no permission, a symlink loop). Never blocks
    on open.
    """
    fd, size = _open_regular_fd(path, inside)
    try:
        if size > max_bytes:
            raise UnreadableFile(path, over_limit(size, max_bytes))
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise UnreadableFile(path, f"grew past the {human_size(max_bytes)} limit; not read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path | str, *, inside: Sequence[Path | str] | None = None) -> BinaryIO:
    """A regular file opened for reading in binary mode (no size cap: for streaming); raises
    UnreadableFile for a FIFO, device or socket, without blocking on it, or one outside
    `inside` once its links are followed."""
    fd, _size = _open_regular_fd(path, inside)
    try:
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(
    path: Path | str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    inside: Sequence[Path | str] | None = None,
) -> str:
    """`read_regular`, decoded as UTF-8 with undecodable bytes replaced."""
    return read_regular(path, max_bytes, inside=inside).decode("utf-8", "replace")


def unreadable_reason(exc: OSError) -> str:
    """One line for a file that was not read: our own reason, or the OS's words without the
    `[Errno N]` noise."""
    if isinstance(exc, UnreadableFile):
        return str(exc)
    name = display_path(exc.filename) if exc.filename else "the file"
    return f"{name}: {exc.strerror or exc}"


def binary_reason(data: bytes, text: str | None = None) -> str | None:
    """Why `data` is not source code (NUL bytes, or mostly bytes that are not UTF-8), or None.

    A Latin-1 file with a few accented letters is still text: only a high share of undecodable
    characters counts. `text`, when given, is `data` already decoded with errors replaced.
    """
    if b"\0" in data:
        return "it holds NUL bytes"
    if data.isascii():
        return None
    decoded = text if text is not None else data.decode("utf-8", "replace")
    bad = decoded.count("\ufffd")
    if bad >= _BAD_UTF8_MIN and bad > _BAD_UTF8_SHARE * len(decoded):
        return f"{bad} of its {len(decoded)} characters are not UTF-8"
    return None


def display_path(path: Path | str) -> str:
    """A path as printable text: bytes that are not UTF-8 (kept by Python as surrogate
    escapes) become `\\xNN`, so the name can be printed and serialised."""
    s = os.fspath(path)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
