"""What crosses between this machine and a node: the request's files out, the result's files back.

Worker requests name files by absolute path, and those paths mean nothing on another machine.
Before a job leaves, every file a request names (by its field name: `FILE_KEYS`) is read and
keyed by content; on the node it is placed in the blob cache and the request is rewritten to the
node's copy. Folders a worker writes into (`DIR_KEYS`) become a scratch folder on the node; what
the worker leaves there and its result names comes back and is written into the original folder
(never over an existing file). Paths in the result are rewritten back, so diagnostics point at the
user's files and callers cannot tell a remote result from a local one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stitch_lsp.candidate_header import relative_reference
from stitch_lsp.cluster.blobs import Blob, cache_root, digest, read_blob

FILE_KEYS = frozenset({"reference", "candidate", "path", "report"})
"""Request fields that hold the absolute path of an input file (verify, planner, builtin,
profile, report reading)."""
DIR_KEYS = frozenset({"report_dir"})
"""Request fields naming a folder the worker writes into."""
LOCAL_ONLY_KEYS = frozenset({"python"})
"""This machine's settings that mean nothing on a node (its interpreter): dropped."""
MAX_RETURNED_BYTES = 512 * 1024 * 1024
"""A result file larger than this stays on the node; the result says where."""


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """`value` (parsed JSON) with `fn` applied to every string in it."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    return value


def replace_paths(value: Any, mapping: Mapping[str, str]) -> Any:
    """Every occurrence of a key of `mapping` in every string, replaced by its value (longest
    first, so a file inside a mapped folder is not half-rewritten)."""
    if not mapping:
        return value
    order = sorted(mapping, key=len, reverse=True)

    def fn(s: str) -> str:
        for old in order:
            if old in s:
                s = s.replace(old, mapping[old])
        return s

    return map_strings(value, fn)


@dataclass
class Outbound:
    """A request ready to leave: its JSON, the files it names and the folders it writes into."""

    request: dict[str, Any]
    files: dict[str, Blob] = field(default_factory=dict)
    """Local absolute path -> content key."""
    data: dict[str, bytes] = field(default_factory=dict)
    """Content key (sha256) -> bytes; each content once."""
    dirs: list[str] = field(default_factory=list)
    """Local folders the worker writes into, in order (node scratch folders out0, out1, ...)."""


def outbound(request: dict[str, Any]) -> Outbound:
    """Collect the files and folders `request` names (missing files stay as they are: the
    worker reports them as it would locally)."""
    out = Outbound(request={})

    def walk(value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            value = _with_header(value)
            return {k: walk(v, k) for k, v in value.items() if k not in LOCAL_ONLY_KEYS}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and os.path.isabs(value):
            if key in FILE_KEYS and os.path.isfile(value) and value not in out.files:
                blob, data = read_blob(Path(value))
                out.files[value] = blob
                out.data[blob.sha256] = data
            elif key in DIR_KEYS and value not in out.dirs:
                out.dirs.append(value)
        return value

    out.request = walk(request, None)
    return out


def _with_header(item: dict[str, Any]) -> dict[str, Any]:
    """A builtin generation request names the reference relative to the folder the candidate
    will be written into; that relation holds on this machine only, so it is computed here."""
    ref, folder = item.get("reference"), item.get("candidate_dir")
    if "reference_header" not in item or item["reference_header"] is not None:
        return item
    if not (isinstance(ref, str) and isinstance(folder, str)):
        return item
    return {**item, "reference_header": relative_reference(Path(ref), Path(folder))}


@dataclass
class Returned:
    """A result file produced on the node: where it was there, and its bytes."""

    node_path: str
    data: bytes
    folder: int | None = None
    """Index of the request folder (`Outbound.dirs`) it was written into, if any."""
    relative: str = ""


def collect_returned(result: Any, scratch: Path, dir_roots: list[Path]) -> list[Returned]:
    """Files under the job's scratch folder that the result names (e.g. an ncu report)."""
    found: dict[str, Returned] = {}
    scratch = scratch.resolve()

    def visit(s: str) -> str:
        if not os.path.isabs(s) or s in found:
            return s
        p = Path(s)
        try:
            p.resolve().relative_to(scratch)
        except (ValueError, OSError):
            return s
        if not p.is_file() or p.stat().st_size > MAX_RETURNED_BYTES:
            return s
        folder, relative = None, p.name
        for i, root in enumerate(dir_roots):
            try:
                relative = p.resolve().relative_to(root.resolve()).as_posix()
                folder = i
                break
            except ValueError:
                continue
        found[s] = Returned(s, p.read_bytes(), folder, relative)
        return s

    map_strings(result, visit)
    return list(found.values())


class ReturnedFileError(ValueError):
    """A node's reply names a result file that cannot be written here; the message says why."""


def returned_parts(relative: object) -> tuple[str, ...]:
    """The components of a node's `relative` path, checked: a non-empty relative POSIX path with
    no `..`, no NUL and no empty or `.` component. ReturnedFileError otherwise."""
    if not isinstance(relative, str) or not relative:
        raise ReturnedFileError(f"a returned file has no usable relative path ({relative!r})")
    if "\x00" in relative:
        raise ReturnedFileError(f"the returned file path {relative!r} holds a NUL byte")
    if relative.startswith("/") or os.path.isabs(relative):
        raise ReturnedFileError(f"the returned file path {relative!r} is absolute")
    parts = tuple(relative.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise ReturnedFileError(
            f"the returned file path {relative!r} has an empty, `.` or `..` component"
        )
    return parts


def _destination(root: Path, parts: tuple[str, ...]) -> Path:
    """`root/parts...`, refused where a folder on the way is a symlink or not a folder, or where
    the result, resolved, is not inside `root`; missing folders are created."""
    base = root.resolve()
    where = base
    for part in parts[:-1]:
        where = where / part
        if where.is_symlink():
            raise ReturnedFileError(
                f"{where} is a symlink; a returned file is not written through it"
            )
        if where.exists() and not where.is_dir():
            raise ReturnedFileError(f"{where} is not a folder; the returned file cannot go in it")
        where.mkdir(exist_ok=True)
    target = where / parts[-1]
    if not target.parent.resolve().is_relative_to(base):
        raise ReturnedFileError(f"the returned file {target} would land outside {base}")
    return target


def _check_item(item: object) -> Returned:
    ok = (
        isinstance(item, Returned)
        and isinstance(item.node_path, str)
        and isinstance(item.data, bytes)
        and (item.folder is None or (type(item.folder) is int and item.folder >= 0))
    )
    if not ok:
        raise ReturnedFileError(f"the node returned a malformed file entry ({type(item).__name__})")
    return item  # type: ignore[return-value]


def place_returned(files: list[Returned], dirs: list[str]) -> dict[str, str]:
    """Write the node's result files here; returns node path -> local path.

    The node's `relative` path is not trusted: it must pass `returned_parts`, and the file lands
    inside the request's folder (or the results cache), never through a symlink and never over
    an existing file. ReturnedFileError when an entry fails; one whose path or fields are bad
    is refused before any file is written."""
    planned: list[tuple[Returned, tuple[str, ...]]] = []
    for raw in files:
        item = _check_item(raw)
        planned.append((item, returned_parts(item.relative)))
    mapping: dict[str, str] = {}
    for item, parts in planned:
        if item.folder is not None and item.folder < len(dirs):
            target = free_path(_destination(Path(dirs[item.folder]), parts))
        else:
            folder = cache_root() / "results" / digest(item.data)
            folder.mkdir(parents=True, exist_ok=True)
            target = _destination(folder, parts[-1:])
            if target.is_file() and not target.is_symlink() and target.read_bytes() == item.data:
                mapping[item.node_path] = str(target)
                continue
            target = free_path(target)
        _write_new(target, item.data)
        mapping[item.node_path] = str(target)
    return mapping


def _write_new(target: Path, data: bytes) -> None:
    """Write `target` through a fresh temporary file beside it (created exclusively, never
    through a link), then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def free_path(path: Path) -> Path:
    """`path`, or `stem_2.ext`, `stem_3.ext`, ... : a name nothing holds yet (a dangling
    symlink holds its name too)."""
    if not os.path.lexists(path):
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem}_{n}{path.suffix}")
        if not os.path.lexists(candidate):
            return candidate
        n += 1
