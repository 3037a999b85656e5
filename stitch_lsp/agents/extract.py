"""Pull the candidate program out of a Coder reply.

Models wrap code in Markdown fences, sometimes several (a sketch, then the file), sometimes
none. The Verifier takes a KernelBench-format Python file that defines `ModelNew`, so that is
what we look for: the fenced Python block that defines `ModelNew`, else the largest Python
block, else an unfenced reply that is itself such a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S
)
_OPEN_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*$", re.M)
_PY_LANGS = {"python", "py", "python3", ""}
_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.M)


@dataclass(frozen=True)
class Extracted:
    code: str | None
    problem: str | None = None  # why nothing usable was found


def extract_code(reply: str) -> Extracted:
    """Return the candidate file in `reply`, or why there is none."""
    if not reply or not reply.strip():
        return Extracted(None, "the reply was empty")
    blocks = [(m.group(2).lower(), m.group(3)) for m in _FENCE.finditer(reply)]
    python = [body for lang, body in blocks if lang in _PY_LANGS]
    with_model = [body for body in python if _MODEL_NEW.search(body)]
    if with_model:
        return Extracted(_tidy(max(with_model, key=len)))
    if python:
        return Extracted(None, "the Python code in the reply does not define `class ModelNew`")
    if blocks:
        langs = ", ".join(sorted({lang or "plain" for lang, _ in blocks}))
        return Extracted(
            None, f"the reply has code blocks ({langs}) but no Python file with ModelNew"
        )
    opened = _OPEN_FENCE.findall(reply)
    if len(opened) % 2 == 1:
        return Extracted(None, "the reply opens a code block that it never closes (truncated?)")
    if _MODEL_NEW.search(reply) and re.search(r"^(import|from)\s+\w", reply, re.M):
        return Extracted(_tidy(reply))
    return Extracted(None, "the reply has no code block")


def _tidy(code: str) -> str:
    return code.strip("\n") + "\n"
