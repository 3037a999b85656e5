"""The `# stitch-lsp: reference=` header: one writer that quotes or refuses, one reader for both
the quoted form and the plain one older files carry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from stitch_lsp.analysis import Document, analyze
from stitch_lsp.candidate_files import with_header
from stitch_lsp.candidate_header import (
    HeaderError,
    find_reference,
    header_line,
    is_header_line,
    read_header,
)


def _reference_seen_by_analysis(text: str) -> str | None:
    return analyze(Document("file:///w/c.py", text, "python")).reference_header


@pytest.mark.parametrize(
    "name",
    [
        "my problem.py",
        "../dir with space/p.py",
        'quote".py',
        "hash # not a comment.py",
        "back\\slash.py",
        "ünï cödé.py",
        '"starts quoted".py',
    ],
)
def test_names_that_are_not_plain_are_quoted_and_read_back(name: str) -> None:
    line = header_line(name)
    assert line.startswith('# stitch-lsp: reference="')
    assert "\n" not in line
    assert read_header(line) == name
    assert find_reference(f"{line}\nimport torch\n") == name
    assert _reference_seen_by_analysis(f"{line}\nimport torch\n") == name
    ast.parse(f"{line}\nx = 1\n")  # still only a comment


def test_plain_paths_are_written_as_before() -> None:
    assert header_line("../problems/p.py") == "# stitch-lsp: reference=../problems/p.py"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("# stitch-lsp: reference=../problems/p.py", "../problems/p.py"),
        ("#stitch-lsp:reference=p.py", "p.py"),
        ("  # stitch-lsp: reference = p.py  ", "p.py"),
    ],
)
def test_old_plain_headers_stay_readable(line: str, expected: str) -> None:
    assert read_header(line) == expected
    assert _reference_seen_by_analysis(f"{line}\nimport torch\n") == expected


@pytest.mark.parametrize(
    "line",
    [
        "# stitch-lsp: reference=my problem.py",  # an unquoted space: not a header any more
        '# stitch-lsp: reference="unterminated.py',
        '# stitch-lsp: reference="a\\nb.py"',  # a quoted newline is refused on reading too
        "# stitch-lsp: reference=",
    ],
)
def test_malformed_headers_name_nothing(line: str) -> None:
    with pytest.raises(HeaderError):
        read_header(line)
    assert is_header_line(line)  # still the header's line: a writer replaces it, a view strips it
    assert find_reference(f"{line}\nimport torch\n") is None


@pytest.mark.parametrize(
    "bad", ["a\nimport os.py", "a\r.py", "a\x00.py", "a\u2028.py", "\u202e.py"]
)
def test_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(HeaderError, match="control character"):
        header_line(bad)


def test_a_newline_in_the_reference_file_name_injects_nothing(tmp_path: Path) -> None:
    ref = tmp_path / "p\nimport os; os.system('touch x')\n.py"
    out = tmp_path / "out.py"
    with pytest.raises(HeaderError, match="U\\+000A"):
        with_header("import torch\n", ref, out)


def test_a_space_in_the_reference_file_name_keeps_the_header(tmp_path: Path) -> None:
    ref = tmp_path / "my problem.py"
    out = tmp_path / "my problem_stitch.py"
    text = with_header("# stitch-lsp: reference=my problem.py\nimport torch\n", ref, out)
    first, rest = text.split("\n", 1)
    assert first == '# stitch-lsp: reference="my problem.py"'
    assert rest == "import torch\n"  # the Coder's broken header line was replaced
    assert is_header_line(first)
    assert _reference_seen_by_analysis(text) == "my problem.py"


def test_generate_refuses_a_reference_name_no_header_can_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stitch_lsp.cli.main import main

    ref = tmp_path / "p\nimport os.py"
    ref.write_text("import torch\n")
    code = main(["generate", str(ref), "--coder", "builtin", "--verify", "compile"])
    assert code == 2
    assert "control character U+000A" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == [ref.name]  # nothing was written


AWKWARD_NAMES = [
    "-p.py",
    "--.py",
    "a - b.py",
    "../dir-with-dash/p-1.py",
    "it's.py",
    'say "hi".py',
    "日本語 ü.py",
    "rocket 🚀.py",
    "what? no: a colon .py",
]


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_what_the_writer_writes_the_reader_reads(name: str, tmp_path: Path) -> None:
    line = header_line(name)
    assert read_header(line) == name
    assert is_header_line(line)
    assert find_reference(f"{line}\n# more\nimport torch\n") == name
    assert _reference_seen_by_analysis(f"{line}\nimport torch\n") == name
    ast.parse(f"{line}\nx = 1\n")
    # through the file writer too: the header names the reference relative to the output
    folder = tmp_path / "out dir"
    folder.mkdir()
    text = with_header("import torch\n", tmp_path / name, folder / "c.py")
    assert find_reference(text) == Path("..", name).as_posix()


def test_a_plain_path_with_dashes_is_written_plain() -> None:
    assert header_line("-p.py") == "# stitch-lsp: reference=-p.py"
    assert header_line("a - b.py") == '# stitch-lsp: reference="a - b.py"'


FIRST_LINES = [
    "# stitch-lsp: reference=p.py",
    '# stitch-lsp: reference="my problem.py"',
    "   # stitch-lsp: reference=p.py",
    "#stitch-lsp:reference = p.py",
    "# stitch-lsp: reference=my problem.py",  # broken: an unquoted space
    '# stitch-lsp: reference="unterminated.py',  # broken
    "# stitch-lsp: other=p.py",
    "# stitch-lsp reference=p.py",
    "# a comment",
    "import torch",
]


@pytest.mark.parametrize("first", FIRST_LINES)
def test_every_place_that_skips_the_header_agrees_on_its_line(first: str, tmp_path: Path) -> None:
    """The results view (comparing a file with a trajectory's code), the standalone export
    (its note goes after the header) and the file writer (it replaces the Coder's header) all
    take the same first lines for the header."""
    from stitch_lsp.export.standalone import STANDALONE_NOTE, _with_note
    from stitch_lsp.server.features.results import _without_header

    text = f"{first}\nx = 1\n"
    header = is_header_line(first)
    assert header is (_without_header(text) == "x = 1")
    exported = _with_note(text).splitlines()
    assert exported.index(STANDALONE_NOTE) == (1 if header else 0)
    written = with_header(text, tmp_path / "p.py", tmp_path / "c.py").splitlines()
    assert written[0] == "# stitch-lsp: reference=p.py"
    assert written[1:] == (["x = 1"] if header else [first, "x = 1"])
