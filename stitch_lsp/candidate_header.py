"""The `# stitch-lsp: reference=PATH` line that starts a generated file: written and read here only.

A plain path is written as it is (`reference=../problems/p.py`), as files have always been; any
other is written as a JSON string literal (`reference="my problem.py"`), so a space, a quote or
a `#` stays inside the value. Control characters (a newline would end the comment and start a
statement) and other line breaks are refused, not escaped: such a name is not worth a header
that a reader might take for something else. Both forms read back; a line that is neither is no
header.
"""

from __future__ import annotations

import json
import re
import unicodedata

PREFIX = "# stitch-lsp: reference="
# The header line in either form; group 1 is the value as written (quoted or plain).
HEADER_RE = re.compile(
    r'^#[ \t]*stitch-lsp:[ \t]*reference[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|[^\s"]\S*)[ \t]*$'
)
# Any line that starts like a header, valid or not: replaced when a header is written.
HEADER_START = re.compile(r"^#[ \t]*stitch-lsp:[ \t]*reference[ \t]*=")
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
    """`# stitch-lsp: reference=...` naming `reference` (a path relative to the file)."""
    return PREFIX + format_value(reference)


def parse_line(line: str) -> str | None:
    """The reference path a header line names, or None when the line is no valid header."""
    m = HEADER_RE.match(line.strip())
    if m is None:
        return None
    raw = m.group(1)
    if not raw.startswith('"'):
        value = raw
    else:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(value, str):
            return None
    try:
        check_value(value)
    except HeaderError:
        return None
    return value


def is_header_line(line: str) -> bool:
    return HEADER_RE.match(line.strip()) is not None


def find_reference(text: str) -> str | None:
    """The path the header names, looked for in the file's leading comment lines."""
    for line in text.splitlines()[:MAX_LINES]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if is_header_line(stripped):
            return parse_line(stripped)
    return None
