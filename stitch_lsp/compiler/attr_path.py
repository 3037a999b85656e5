"""A module's tensors by attribute path: data in generated code, text in messages, never code.

A submodule or tensor name is whatever the reference set: `block1-0`, `0`, `class`, a name with
spaces or quotes, or any string given to setattr. Generated code therefore reaches tensors through
a table of repr'd dotted paths, resolved by `TENSOR_AT_SOURCE` (copied into the candidate); the
display form made here appears only in comments, docstrings and messages, with every character
that could end a comment or a string literal escaped.
"""

from __future__ import annotations

import keyword
import re
import string

# Characters shown as they are inside a quoted name; everything else becomes \xNN or \uNNNN.
_PLAIN = frozenset(string.ascii_letters + string.digits + "_-+.,:;=@#$%&*!?()<>/|~^ ")
# Characters kept in comment text (origins, kernel notes): printable ASCII less the backslash,
# which would splice a C++ `//` comment into the next line or start an escape in a docstring.
_COMMENT = frozenset(c for c in string.printable if c not in "\\\t\n\r\x0b\x0c")


# An escape display_path writes (kept as it is by comment_text), or any one character.
_COMMENT_PIECE = re.compile(r"(\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8})|.", re.DOTALL)


def _escape(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _quoted(name: str) -> str:
    return "'" + "".join(c if c in _PLAIN else _escape(c) for c in name) + "'"


def display_path(path: str) -> str:
    """`layers.0.weight` -> `self.layers[0].weight`; `net.block1-0` -> `self.net['block1-0']`.

    For readers only: a name that is not a plain identifier is shown quoted and escaped, so the
    result holds no newline, backslash-newline or run of quotes whatever the names are.
    """
    if not path:
        return "self"
    out = ["self"]
    for part in path.split("."):
        if part.isascii() and part.isdigit():
            out.append(f"[{part}]")
        elif part.isascii() and part.isidentifier() and not keyword.iskeyword(part):
            out.append(f".{part}")
        else:
            out.append(f"[{_quoted(part)}]")
    return "".join(out)


def comment_text(text: str) -> str:
    """`text` safe inside a `#` or `//` comment, a docstring or a raw triple-quoted string:
    printable ASCII only, no backslash but the escapes `display_path` writes, and no two equal
    quotes in a row (so no triple quote)."""
    out: list[str] = []
    for m in _COMMENT_PIECE.finditer(text):
        piece = m.group(0)
        if m.group(1) is not None:  # an escape that display_path wrote: kept
            out.append(piece)
        elif piece not in _COMMENT or (piece in "'\"" and out and out[-1] == piece):
            out.append(_escape(piece))
        else:
            out.append(piece)
    return "".join(out)


def is_identifier(name: str) -> bool:
    """A name that may be pasted into generated code as a Python identifier."""
    return name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


# The resolver the candidate carries: submodules by `get_submodule`, the tensor by getattr, so a
# parameter, a buffer and a plain tensor attribute are all found and no name is ever evaluated.
TENSOR_AT_SOURCE = '''\
def _tensor_at(model, path):
    """A parameter, buffer or tensor attribute of `model` by its dotted path (a name, not code)."""
    owner, _, name = path.rpartition(".")
    return getattr(model.get_submodule(owner), name)
'''
