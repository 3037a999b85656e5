"""Content-addressed transfer and path rewriting, without Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.cluster.blobs import Blob, BlobCache, digest
from stitch_lsp.cluster.transfer import (
    collect_returned,
    outbound,
    place_returned,
    replace_paths,
)


def test_outbound_keys_each_content_once_and_drops_local_only_fields(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("class Model: ...\n")
    twin = tmp_path / "twin.py"
    twin.write_text("class Model: ...\n")
    out = outbound(
        {
            "reference": str(ref),
            "candidate": str(twin),
            "report_dir": str(tmp_path / "reports"),
            "python": "/usr/bin/python3",
            "note": str(ref),  # not a file field: left alone, not shipped twice
            "items": [{"reference": str(ref)}],
        }
    )
    assert set(out.files) == {str(ref), str(twin)}
    assert len(out.data) == 1  # same bytes, one content
    assert out.files[str(ref)] == Blob(digest(ref.read_bytes()), "ref.py")
    assert out.dirs == [str(tmp_path / "reports")]
    assert "python" not in out.request


def test_missing_files_are_left_for_the_worker_to_report(tmp_path: Path) -> None:
    out = outbound({"reference": str(tmp_path / "gone.py")})
    assert out.files == {} and out.request == {"reference": str(tmp_path / "gone.py")}


def test_cache_refuses_content_that_does_not_match_its_key(tmp_path: Path) -> None:
    cache = BlobCache(tmp_path)
    blob = Blob(digest(b"abc"), "a.py")
    assert cache.put(blob, b"abc").read_bytes() == b"abc"
    assert cache.has(blob)
    with pytest.raises(ValueError, match="does not match"):
        cache.put(Blob(digest(b"abc"), "b.py"), b"abd")
    with pytest.raises(ValueError, match="not a content key"):
        cache.path(Blob(digest(b"abc"), "../escape.py"))


def test_result_files_come_back_into_the_requested_folder_never_over_a_file(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "node" / "job"
    (scratch / "out0").mkdir(parents=True)
    report = scratch / "out0" / "r.ncu-rep"
    report.write_bytes(b"REPORT")
    elsewhere = tmp_path / "node" / "not-scratch.txt"
    elsewhere.write_text("x")
    result = {"report_path": str(report), "log": f"wrote {report}", "other": str(elsewhere)}
    returned = collect_returned(result, scratch, [scratch / "out0"])
    assert [r.node_path for r in returned] == [str(report)]

    local = tmp_path / "mine"
    local.mkdir()
    (local / "r.ncu-rep").write_bytes(b"the user's own")
    mapping = place_returned(returned, [str(local)])
    placed = Path(mapping[str(report)])
    assert placed == local / "r_2.ncu-rep" and placed.read_bytes() == b"REPORT"
    assert (local / "r.ncu-rep").read_bytes() == b"the user's own"
    back = replace_paths(result, mapping)
    assert back["report_path"] == str(placed) and back["log"] == f"wrote {placed}"


def test_a_generation_header_is_computed_on_this_machine(tmp_path: Path) -> None:
    ref = tmp_path / "problems" / "p.py"
    ref.parent.mkdir()
    ref.write_text("x = 1\n")
    item = {"reference": str(ref), "candidate_dir": str(tmp_path / "out"), "reference_header": None}
    out = outbound({"items": [item]})
    assert out.request["items"][0]["reference_header"] == "../problems/p.py"
