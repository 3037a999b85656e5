"""Incremental sync: after any sequence of LSP edits, the server's copy of the text is what the
LSP spec says the client has. Positions are UTF-16; a column past the end of a line means the
end of the line, a line past the end means the end of the file (clients do send those).

(pygls's own workspace copy gets some of these wrong, e.g. a delete past the end of a line,
which is one reason the server analyses its own `Document`.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stitch_lsp.analysis import Document

ALPHABET = st.sampled_from(["a", "b", " ", "\n", "é", "🙂", "(", '"'])


def spec_offset(text: str, line: int, char: int) -> int:
    """Where an LSP position points in `text` (a str index), clamped as the spec says."""
    lines = text.split("\n")
    if line >= len(lines):
        return len(text)
    base = sum(len(x) + 1 for x in lines[:line])
    units = i = 0
    row = lines[line]
    while i < len(row) and units < char:
        units += 2 if ord(row[i]) > 0xFFFF else 1
        i += 1
    return base + i


def spec_apply(text: str, rng: tuple[int, int, int, int], new: str) -> str:
    a = spec_offset(text, rng[0], rng[1])
    b = spec_offset(text, rng[2], rng[3])
    a, b = min(a, b), max(a, b)
    return text[:a] + new + text[b:]


edits = st.lists(
    st.tuples(
        st.integers(0, 8), st.integers(0, 12), st.integers(0, 8), st.integers(0, 12),
        st.text(ALPHABET, max_size=6),
    ),
    max_size=12,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(start=st.text(ALPHABET, max_size=40), changes=edits)
def test_document_follows_the_spec(
    start: str, changes: list[tuple[int, int, int, int, str]]
) -> None:
    doc = Document("file:///tmp/sync/a.py", start, "python", 0)
    expected = start
    for sl, sc, el, ec, text in changes:
        if (el, ec) < (sl, sc):
            sl, sc, el, ec = el, ec, sl, sc
        doc.apply_change((sl, sc, el, ec), text)
        expected = spec_apply(expected, (sl, sc, el, ec), text)
        assert doc.text == expected
    assert doc.roots and doc.roots[-1].end_byte == len(expected.encode())
