"""The `# stitch-lsp: reference=PATH` line that starts a generated file: written and read here only.

A plain path is written as it is (`reference=../problems/p.py`), as files have always been; any
other is written as a JSON string literal (`reference="my problem.py"`), so a space, a quote or
a `#` stays inside the value. Control characters (a newline would end the comment and start a
statement) and other line breaks are refused, not escaped: such a name is not worth a header
that a reader might take for something else. Both forms read back.

`header_line` is the one writer and `read_header` the one reader: whatever writes, replaces,
strips or follows the header goes through them, so no two places disagree on what the header
line is.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path

PREFIX = "# stitch-lsp: reference="
# A line that starts like a header, well-formed or not; the value follows the match.
_START = re.compile(r"^#[ \t]*stitch-lsp:[ \t]*reference[ \t]*=[ \t]*")
# The value as written: a JSON string literal, or a plain path (no space, no leading quote).
_VALUE = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s"]\S*')
_PLAIN = re.compile(r"[A-Za-z0-9._/+@~,=-]+")
# Unicode categories refused in a value: controls, format characters (bidirectional overrides
# included), line and paragraph separators.
_REFUSED = frozenset({"Cc", "Cf", "Zl", "Zp"})
MAX_LINES = 40  # how far into a file's leading comments the header is looked for


class HeaderError(ValueError):
    """A reference path that no header can name; the message says which character and why."""


def check_value(reference: str) -> None:
    """Raise HeaderError unless `reference` can go into a header."""
    if not reference:
        raise HeaderError("the reference path is empty")
    for c in reference:
        if unicodedata.category(c) in _REFUSED:
            raise HeaderError(
                f"the reference path {json.dumps(reference)} holds the control character "
                f"U+{ord(c):04X}, which a `# stitch-lsp: reference=` header cannot carry; "
                "rename the file"
            )


def format_value(reference: str) -> str:
    """The value as a header writes it: plain when it is only path characters, else JSON."""
    check_value(reference)
    if _PLAIN.fullmatch(reference):
        return reference
    return json.dumps(reference, ensure_ascii=False)


def header_line(reference: str) -> str:
    """`# stitch-lsp: reference=...` naming `reference` (a path relative to the file): the one
    writer of the header."""
    return PREFIX + format_value(reference)


def relative_reference(reference: Path, folder: Path) -> str:
    """`reference` as a header in a file in `folder` names it: relative, with `/` on every
    system, so the file still finds its reference when the two move together."""
    return Path(os.path.relpath(reference.resolve(), folder.resolve())).as_posix()


def read_header(line: str) -> str | None:
    """The reference path a header line names: the one reader of the header.

    None when the line is no header at all; HeaderError when it starts like one but names
    nothing a header can (an unquoted space, a broken quote, a control character), so that a
    caller can tell "no header" from "a header to replace or report"."""
    stripped = line.strip()
    m = _START.match(stripped)
    if m is None:
        return None
    raw = stripped[m.end() :]
    if not _VALUE.fullmatch(raw):
        why = "names no path" if not raw else f"value {raw!r} is neither a plain path nor quoted"
        raise HeaderError(f"the `{PREFIX}` header {why}")
    value = _unquoted(raw) if raw.startswith('"') else raw
    check_value(value)
    return value


def _unquoted(raw: str) -> str:
    """`raw` is one string literal (`_VALUE` saw to it), so JSON gives a str or refuses."""
    try:
        value: str = json.loads(raw)
    except ValueError as exc:
        raise HeaderError(f"the header's quoted path {raw} is not a JSON string: {exc}") from None
    return value


def is_header_line(line: str) -> bool:
    """Whether `line` is a header line, well-formed or not: the line a writer replaces and
    a view strips, so that a broken header never stays beside a good one."""
    return _START.match(line.strip()) is not None


def find_reference(text: str) -> str | None:
    """The path the header names, looked for in the file's leading comment lines (a broken
    header line is passed over, as a comment)."""
    for line in text.splitlines()[:MAX_LINES]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        try:
            reference = read_header(stripped)
        except HeaderError:
            continue
        if reference is not None:
            return reference
    return None
