"""Reading files that a workspace names: only regular files, never more than a cap.

A path in a `# stitch-lsp: reference=` header, a folder given to `check` or a report's source
list comes from the workspace, and a workspace can hold anything: a FIFO (opening and reading it
blocks until a writer appears, which may be never), `/dev/zero` (reads without end) or a
multi-gigabyte file. So every such read opens without blocking, checks that the file is a
regular file, and reads at most a cap. Binary content is recognised here too, so the parser is
never fed a megabyte of noise (tree-sitter's error recovery on it took half a minute).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

DEFAULT_MAX_BYTES = 5_000_000
# Share of undecodable characters above which a file is binary, not text with a stray byte.
_BAD_UTF8_SHARE = 0.05
_BAD_UTF8_MIN = 16


class UnreadableFile(OSError):
    """A path that is not a regular file, or is over the size cap; `reason` says which."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{display_path(path)}: {reason}")
        self.path = Path(path)
        self.reason = reason


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`.

    Raises UnreadableFile for a FIFO, device, socket or folder, or a file over the cap, and
    OSError for the rest (missing, no permission, a symlink loop). Never blocks on open.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"{kind_of(st.st_mode)}, not a regular file; not read")
        if st.st_size > max_bytes:
            raise UnreadableFile(
                path, f"{st.st_size} bytes, over the {max_bytes}-byte limit; not read"
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise UnreadableFile(path, f"over the {max_bytes}-byte limit; not read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path | str) -> BinaryIO:
    """A regular file opened for reading in binary mode (no size cap: for streaming); raises
    UnreadableFile for a FIFO, device or socket, without blocking on it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"{kind_of(st.st_mode)}, not a regular file; not read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """`read_regular`, decoded as UTF-8 with undecodable bytes replaced."""
    return read_regular(path, max_bytes).decode("utf-8", "replace")


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
