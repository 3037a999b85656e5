"""The worker side of the seam: read the request file, write the result file.

A worker module's `main(argv)` receives `[REQUEST.json, RESULT.json]` from the launcher. The
result may be written more than once (a worker that can be killed by the code it runs saves its
progress after every phase); each write replaces the file whole, so the launcher never reads
half of one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, TypeAdapter

T = TypeVar("T")


class ResultFile:
    """Where the worker's result goes; `save` may be called after every phase."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, result: BaseModel) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(result.model_dump_json(), encoding="utf-8")
        os.replace(tmp, self.path)


def read_request(argv: list[str], request_type: type[T], prog: str) -> tuple[T, ResultFile]:
    """The request and the result file named on the command line (exit 2 when misused)."""
    if len(argv) != 2:
        print(f"usage: {prog} REQUEST.json RESULT.json (started by stitch-lsp)", file=sys.stderr)
        raise SystemExit(2)
    request = TypeAdapter(request_type).validate_json(Path(argv[0]).read_bytes())
    return request, ResultFile(Path(argv[1]))
