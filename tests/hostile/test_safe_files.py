"""The pieces under the hostile loop cases, one by one: the safe read, the confinement of output
folders, the trajectory writer, the trajectory scan, the watched-file filter, the in-place text
of a file too large to parse, the one-scan kernel references and the findings cap."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from stitch_lsp.agents.trajectory import TrajectoryWriter
from stitch_lsp.analysis.document import Document
from stitch_lsp.files import UnreadableFile, human_size, read_regular, unreadable_reason
from stitch_lsp.server.features.results import MAX_SCAN_ENTRIES, scan_trajectories
from stitch_lsp.server.scopes import OutsideWorkspace, generated_file_folder, output_folder
from stitch_lsp.server.watched_files import ignored


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: os.mkfifo(p), "x.jsonl is not a regular file (a FIFO); not read"),
        (lambda p: p.symlink_to("/dev/zero"), "is not a regular file (a character device)"),
        (lambda p: p.symlink_to("/dev/stdin"), "is not a regular file"),
        (lambda p: p.mkdir(), "is not a regular file (a folder)"),
    ],
)
def test_a_file_that_is_not_regular_is_refused_without_blocking(
    tmp_path: Path, make: object, why: str
) -> None:
    path = tmp_path / "x.jsonl"
    make(path)  # type: ignore[operator]
    with pytest.raises(UnreadableFile, match=r".*") as caught:
        read_regular(path)
    assert why in str(caught.value)


def test_a_sparse_gigabyte_is_refused_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "ref.py"
    with open(big, "wb") as fh:
        fh.truncate(1_200_000_000)
    with pytest.raises(UnreadableFile) as caught:
        read_regular(big, 16 << 20)
    assert str(caught.value).endswith("ref.py is 1.2 GB, over the 16 MiB limit; not read")
    assert (human_size(5_000_000), human_size(1 << 30), human_size(12)) == (
        "5.0 MB",
        "1 GiB",
        "12 bytes",
    )


def test_a_link_out_of_the_folder_is_refused_and_inside_it_followed(tmp_path: Path) -> None:
    inside, outside = tmp_path / "ws", tmp_path / "secret.txt"
    inside.mkdir()
    outside.write_text("token")
    (inside / "leak.py").symlink_to(outside)
    (inside / "real.py").write_text("x = 1\n")
    (inside / "alias.py").symlink_to(inside / "real.py")
    with pytest.raises(UnreadableFile, match="leads outside"):
        read_regular(inside / "leak.py", inside=[inside])
    assert read_regular(inside / "alias.py", inside=[inside]) == b"x = 1\n"
    missing = unreadable_reason(_raised(lambda: read_regular(inside / "gone.py")))
    assert missing.endswith("gone.py: No such file or directory")


def _raised(fn: object) -> OSError:
    try:
        fn()  # type: ignore[operator]
    except OSError as exc:
        return exc
    raise AssertionError("no error")


def test_a_symlinked_stitch_folder_does_not_lead_outputs_out(tmp_path: Path) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    (ws / ".stitch").symlink_to(elsewhere)
    # The default value (user-level: the workspace did not set it) is refused all the same.
    for user_level in (True, False):
        with pytest.raises(OutsideWorkspace, match="outside the workspace"):
            output_folder("trajectoriesDir", ".stitch/trajectories", [ws], user_level=user_level)
    assert output_folder("trajectoriesDir", str(elsewhere), [ws], user_level=True) == elsewhere


def test_a_symlinked_folder_does_not_receive_a_generated_file(tmp_path: Path) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    (ws / "linked").symlink_to(elsewhere)
    invoked = ws / "linked" / "ref.py"
    with pytest.raises(OutsideWorkspace, match="through a symlink"):
        generated_file_folder(invoked, invoked, [ws])
    (ws / "real").mkdir()
    assert generated_file_folder(ws / "real" / "r.py", invoked, [ws]) == (ws / "real").resolve()


def test_the_trajectory_writer_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "run.jsonl").symlink_to(victim)
    with pytest.raises(FileExistsError, match="was not written over it"):
        TrajectoryWriter(folder, "run").write({"a": 1})
    assert victim.read_text() == "keep\n"
    writer = TrajectoryWriter(folder, "new")
    writer.write({"a": 1})
    writer.write({"a": 2})
    assert (folder / "new.jsonl").read_text().count("\n") == 2


def test_the_trajectory_scan_is_bounded_and_says_what_it_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    (folder / "sub").mkdir(parents=True)
    (folder / "ok.jsonl").write_text("{}\n")
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "sub" / "loop").symlink_to(folder)  # a folder link is not followed
    found, notes = scan_trajectories(folder)
    assert [p.name for p, _ in found] == ["ok.jsonl"]
    assert any("pipe.jsonl is not a regular file (a FIFO)" in n for n in notes.values())
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(MAX_SCAN_ENTRIES + 5):
        (crowded / f"{i}.txt").touch()
    _, notes = scan_trajectories(crowded)
    assert any(f"more than {MAX_SCAN_ENTRIES} entries" in n for n in notes.values())


@pytest.mark.parametrize(
    ("uri", "skip"),
    [
        ("file:///w/.venv/lib/python3.11/site-packages/torch/x.py", True),
        ("file:///w/node_modules/a/b.cu", True),
        ("file:///w/build/lib/k.cu", True),
        ("file:///w/pkg.egg-info/x.py", True),
        ("file:///w/src/__pycache__/m.py", True),
        ("file:///w/src/model.py", False),
        ("file:///w/venvtools/model.py", False),
    ],
)
def test_watched_changes_under_virtualenvs_and_builds_are_ignored(uri: str, skip: bool) -> None:
    assert ignored(uri) is skip


def test_edits_in_place_give_the_same_text_as_ordinary_edits() -> None:
    line = "x = 1  # é padding\n"
    text = line * 20_000
    fast = Document("file:///big.py", text, "python")
    slow = Document("file:///big.py", text, "python")
    rng = random.Random(24)
    for _ in range(300):
        lines = slow.index.line_count
        l1, c1 = rng.randrange(lines + 3), rng.randrange(25)
        l2, c2 = l1 + rng.choice([0, 0, 1, 4]), rng.randrange(25)
        if (l2, c2) < (l1, c1):
            l1, c1, l2, c2 = l2, c2, l1, c1
        new = rng.choice(["y", "", "\n", "ab\ncd", "é\n\n", "\r\n", "😀"])
        fast.apply_unparsed((l1, c1, l2, c2), new)
        slow.apply_change((l1, c1, l2, c2), new)
        assert fast.size == slow.size
    assert fast.data == slow.data
    assert fast.index.starts == slow.index.starts
    fast.apply_unparsed(None, "whole\n")
    assert fast.text == "whole\n"


def test_kernels_used_as_values_are_found_in_one_scan() -> None:
    from stitch_lsp.analysis import analyze

    cuda = (
        "__global__ void k1(float* y) { y[0] = 1.0f; }\n"
        "__global__ void k10(float* y) { y[0] = 2.0f; }\n"
        "void launch(float* y) { void* f = (void*)&k10; cudaLaunchKernel(f, 1, 1, 0, 0, 0); }\n"
    )
    a = analyze(Document("file:///k.cu", cuda, "cuda-cpp"))
    unused = {d.message.split("`")[1] for d in a.diagnostics if "never launched" in d.message}
    assert "k1" in unused and "k10" not in unused


def test_a_document_with_thousands_of_findings_sends_the_most_severe() -> None:
    from stitch_lsp.config import Settings
    from stitch_lsp.server.documents import OpenDocument
    from stitch_lsp.server.features.static import MAX_DIAGNOSTICS, static_diagnostics

    body = "\n".join(f"__global__ void k{i}(float* y) {{ y[0] = 1.0f; }}" for i in range(800))
    text = (
        "from torch.utils.cpp_extension import load_inline\n"
        f'src = r"""\n{body}\n"""\n'
        'ext = load_inline(name="m", cpp_sources="", cuda_sources=src)\n'
    )
    doc = OpenDocument("file:///m.py", Document("file:///m.py", text, "python"), Settings())
    sent = static_diagnostics(doc)
    assert len(doc.analysis.diagnostics) > MAX_DIAGNOSTICS
    assert len(sent) == MAX_DIAGNOSTICS + 1
    assert sent[0].code == "stitch.too-many-findings" and "most severe are shown" in sent[0].message
