"""Document model: UTF-16 positions, incremental edits equal a fresh parse."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stitch_lsp.analysis import Document
from stitch_lsp.analysis.text_index import LineIndex, utf16_len


def test_positions_count_utf16_units() -> None:
    text = "a = 'é😀x'\nb = 1\n"
    index = LineIndex.of_text(text)
    # 'x' sits after "a = '" (5) + é (1 unit, 2 bytes) + 😀 (2 units, 4 bytes)
    point = (0, len("a = 'é😀".encode()))
    assert index.point_to_position(point) == (0, 8)
    assert index.position_to_point((0, 8)) == point
    # Past the end of a line clamps to the line's end, as LSP asks.
    assert index.position_to_point((1, 99)) == (1, 5)
    assert index.position_to_point((9, 0)) == (2, 0)


def test_incremental_edit_non_ascii() -> None:
    doc = Document("file:///t.py", "s = 'é'\nx = 1\n", "python")
    assert doc.roots
    doc.apply_change((0, 5, 0, 6), "😀😀")  # replace é with two astral characters
    assert doc.text == "s = '😀😀'\nx = 1\n"
    doc.apply_change((0, 9, 0, 9), "z")  # after both emoji: 5 + 2 + 2 units
    assert doc.text == "s = '😀😀z'\nx = 1\n"
    fresh = Document("file:///t.py", doc.text, "python")
    assert [str(r) for r in doc.roots] == [str(r) for r in fresh.roots]


def test_full_replace_and_version() -> None:
    doc = Document("file:///t.cu", "__global__ void k() {}", "cuda-cpp", version=1)
    doc.apply_change(None, "__global__ void q() {}", version=2)
    assert doc.version == 2 and doc.text.startswith("__global__ void q")
    assert doc.roots and not doc.has_error


def test_crlf_lines() -> None:
    doc = Document("file:///t.py", "a = 1\r\nb = 2\r\n", "python")
    doc.apply_change((1, 4, 1, 5), "3")
    assert doc.text == "a = 1\r\nb = 3\r\n"


_CHARS = st.sampled_from([*"ab (:)\n\t'\"#_=xé😀\\", "def ", "class ", "return "])


def _position_of(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n")
    col = utf16_len(before[before.rfind("\n") + 1 :])
    return line, col


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(_CHARS, max_size=40).map("".join),
    edits=st.lists(
        st.tuples(
            st.integers(0, 200), st.integers(0, 10), st.lists(_CHARS, max_size=6).map("".join)
        ),
        max_size=6,
    ),
)
def test_incremental_equals_fresh(base: str, edits: list[tuple[int, int, str]]) -> None:
    doc = Document("file:///p.py", base, "python")
    _ = doc.roots
    text = base
    for start, length, new in edits:
        start = min(start, len(text))
        end = min(start + length, len(text))
        sl, sc = _position_of(text, start)
        el, ec = _position_of(text, end)
        doc.apply_change((sl, sc, el, ec), new)
        text = text[:start] + new + text[end:]
        assert doc.text == text
    fresh = Document("file:///p.py", text, "python")
    assert [str(r) for r in doc.roots] == [str(r) for r in fresh.roots]


def test_from_path_reports_bad_utf8(tmp_path) -> None:
    p = tmp_path / "bad.py"
    p.write_bytes(b"x = 1\ny = '\xff\xfe'\n")
    doc = Document.from_path(p)
    assert doc.decode_error == (1, 5)
    assert "\ufffd" in doc.text
    assert doc.language_id == "python"


def test_outline_of_an_older_version_stays_correct() -> None:
    from stitch_lsp.analysis import analyze

    src = "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    doc = Document("file:///o.py", src, "python")
    old = analyze(doc)
    doc.apply_change((0, 0, 0, 0), "# a comment\n# another\n")
    new = analyze(doc)
    # The old analysis builds its outline only now, after the edit: still the old positions.
    assert old.modules[0].selection_range == (2, 6, 2, 7)
    assert new.modules[0].selection_range == (4, 6, 4, 7)


@settings(max_examples=300, deadline=None)
@given(
    base=st.text(st.sampled_from("ab\n\r é"), max_size=30),
    start=st.integers(0, 40),
    length=st.integers(0, 10),
    new=st.text(st.sampled_from("x\n\r😀"), max_size=6),
)
def test_line_index_follows_edits(base: str, start: int, length: int, new: str) -> None:
    data = base.encode()
    start = min(start, len(data))
    end = min(start + length, len(data))
    ins = new.encode()
    after = data[:start] + ins + data[end:]
    edited = LineIndex(data).edited(after, start, end, ins)
    fresh = LineIndex(after)
    assert (edited.starts, edited.ascii, edited.data) == (fresh.starts, fresh.ascii, fresh.data)
