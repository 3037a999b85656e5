"""A node's reply names where its result files go (`relative`); this machine checks every one.

Crafted replies, no Ray: `place_returned` is what writes a reply's files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from stitch_lsp.cluster.blobs import CACHE_ENV
from stitch_lsp.cluster.transfer import (
    Returned,
    ReturnedFileError,
    place_returned,
    returned_parts,
)


@pytest.fixture
def dest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "reports"
    folder.mkdir()
    return folder


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("../escape.txt", "`..`"),
        ("a/../../escape.txt", "`..`"),
        ("..", "`..`"),
        ("/etc/passwd", "absolute"),
        ("//host/x", "absolute"),
        ("a\x00b", "NUL"),
        ("", "no usable relative path"),
        ("a//b", "empty"),
        ("./a", "`.`"),
        ("a/", "empty"),
    ],
)
def test_bad_relative_paths_are_refused_before_any_write(
    tmp_path: Path, dest: Path, relative: str, why: str
) -> None:
    good = Returned("/node/job/ok.txt", b"fine", 0, "ok.txt")
    bad = Returned("/node/job/x", b"evil", 0, relative)
    with pytest.raises(ReturnedFileError, match=re.escape(why)):
        place_returned([good, bad], [str(dest)])
    assert _files_under(dest) == set()  # not even the good one was written
    assert not (tmp_path / "escape.txt").exists()


def test_bad_paths_are_refused_for_the_results_cache_too(tmp_path: Path, dest: Path) -> None:
    with pytest.raises(ReturnedFileError, match=re.escape("`..`")):
        place_returned([Returned("/node/job/x", b"evil", None, "..")], [])
    assert not (tmp_path / "cache").exists()


def test_a_symlinked_folder_in_the_destination_is_not_followed(tmp_path: Path, dest: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "sub").symlink_to(outside)
    with pytest.raises(ReturnedFileError, match="symlink"):
        place_returned([Returned("/node/job/r", b"evil", 0, "sub/r.ncu-rep")], [str(dest)])
    assert list(outside.iterdir()) == []


def test_a_symlink_at_the_file_name_is_not_written_through(tmp_path: Path, dest: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (dest / "r.txt").symlink_to(victim)
    (dest / "gone.txt").symlink_to(tmp_path / "missing.txt")  # dangling
    mapping = place_returned(
        [
            Returned("/node/job/r.txt", b"REPORT", 0, "r.txt"),
            Returned("/node/job/gone.txt", b"OTHER", 0, "gone.txt"),
        ],
        [str(dest)],
    )
    assert victim.read_text() == "mine"
    assert not (tmp_path / "missing.txt").exists()
    assert Path(mapping["/node/job/r.txt"]) == dest / "r_2.txt"
    assert Path(mapping["/node/job/gone.txt"]) == dest / "gone_2.txt"
    assert (dest / "r_2.txt").read_bytes() == b"REPORT"


@pytest.mark.parametrize(
    "item",
    [
        Returned("/node/job/r", "not bytes", 0, "r"),  # type: ignore[arg-type]
        Returned("/node/job/r", b"x", -1, "r"),  # would pick the last folder
        Returned("/node/job/r", b"x", True, "r"),  # type: ignore[arg-type]
        Returned(None, b"x", 0, "r"),  # type: ignore[arg-type]
        {"node_path": "/node/job/r", "relative": "r"},
    ],
)
def test_malformed_entries_are_refused(dest: Path, item: object) -> None:
    with pytest.raises(ReturnedFileError, match="malformed"):
        place_returned([item], [str(dest)])  # type: ignore[list-item]
    assert _files_under(dest) == set()


def test_a_good_nested_path_lands_inside_the_folder(dest: Path) -> None:
    assert returned_parts("sub/deeper/r.ncu-rep") == ("sub", "deeper", "r.ncu-rep")
    mapping = place_returned(
        [Returned("/node/job/out0/sub/r.ncu-rep", b"REPORT", 0, "sub/r.ncu-rep")], [str(dest)]
    )
    placed = Path(mapping["/node/job/out0/sub/r.ncu-rep"])
    assert placed == dest / "sub" / "r.ncu-rep" and placed.read_bytes() == b"REPORT"
    assert not any(name.startswith(".") for name in os.listdir(dest / "sub"))  # no temp left


def test_the_executor_reports_a_refused_reply_as_a_worker_error(dest: Path) -> None:
    from stitch_lsp.cluster.executor import RayLauncher
    from stitch_lsp.cluster.node import NodeReply
    from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind

    reply = NodeReply(
        ok=True, where="node-1", result={}, returned=[Returned("/n/x", b"e", 0, "../x")]
    )
    call = type("Call", (), {"label": "the profiler"})()
    with pytest.raises(WorkerError) as info:
        RayLauncher._finish(None, call, [str(dest)], reply, 0.0)  # type: ignore[arg-type]
    assert info.value.kind is WorkerErrorKind.no_result
    assert "the profiler: the node's reply was refused" in str(info.value)
    assert "`..`" in str(info.value)
