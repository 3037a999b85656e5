"""Content-addressed files: what a job's files are called on the wire and where a node keeps them.

A file is named by the sha256 of its bytes, so the same reference sent with a hundred candidates
travels once, and a node that already holds a content never fetches it again. On a node each
content lives in `<cache>/<sha256>/<original file name>`: the name is kept because a Python file
is imported under its stem and a `.cu` file is compiled by name.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "STITCH_CLUSTER_CACHE"
"""Where a node keeps received files (default: ~/.cache/stitch-lsp/cluster)."""

_SHA = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Blob:
    """One file's content key and the name it keeps on the node."""

    sha256: str
    name: str


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_blob(path: Path) -> tuple[Blob, bytes]:
    """The key of a local file and its bytes."""
    data = path.read_bytes()
    return Blob(digest(data), path.name), data


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path.home() / ".cache" / "stitch-lsp" / "cluster"


class BlobCache:
    """A node's store of received files. Writes are atomic, so two jobs on one node that receive
    the same content at once never see half a file."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "blobs"

    def path(self, blob: Blob) -> Path:
        if not _SHA.match(blob.sha256) or not _safe_name(blob.name):
            raise ValueError(f"not a content key: {blob}")
        return self.root / blob.sha256 / blob.name

    def has(self, blob: Blob) -> bool:
        return self.path(blob).is_file()

    def put(self, blob: Blob, data: bytes) -> Path:
        """Store `data` under `blob`; refuses bytes that do not match the key."""
        if digest(data) != blob.sha256:
            raise ValueError(f"{blob.name}: content does not match its sha256")
        target = self.path(blob)
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        return target

    def owns(self, path: str) -> bool:
        """Whether `path` is a file of this cache (results name them; they map back)."""
        try:
            Path(path).relative_to(self.root)
        except ValueError:
            return False
        return True


def _safe_name(name: str) -> bool:
    return bool(name) and name not in {".", ".."} and "/" not in name and "\\" not in name
