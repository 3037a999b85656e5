"""Where the CUDA strings of a Python file start, found with the standard tokenizer.

Used only when a report carries no copy of the source (no `--import-source`) and the user maps
it onto a Python file by hand; with a copy, `mapping.align` finds the lines by content.
"""

from __future__ import annotations

import io
import tokenize


def cuda_string_starts(text: str) -> list[int]:
    """1-based lines where string literals that hold `__global__` begin, in file order."""
    starts: list[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and "__global__" in tok.string:
                starts.append(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        return starts
    return starts
