"""A worker for the cluster tests: reads the file its request names, writes one into a folder.

Run by the launcher as `tests.cluster.file_worker` (the repository on the worker's path).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pydantic import BaseModel

from stitch_lsp.workers.entry import read_request
from stitch_lsp.workers.launch import WorkerCall

MODULE = "tests.cluster.file_worker"
REPO = Path(__file__).resolve().parents[2]


class FileJob(BaseModel):
    reference: str
    report_dir: str | None = None
    python: str | None = None


class FileAnswer(BaseModel):
    reference: str
    text: str
    written: str
    cwd: str
    python_seen: str | None


def main(argv: list[str]) -> int:
    request, out = read_request(argv, FileJob, MODULE)
    text = Path(request.reference).read_text()
    folder = Path(request.report_dir or tempfile.mkdtemp())
    written = folder / "report.txt"
    written.write_text(text.upper())
    out.save(
        FileAnswer(
            reference=request.reference,
            text=text,
            written=str(written),
            cwd=os.getcwd(),
            python_seen=request.python,
        )
    )
    return 0


def file_call(reference: Path, report_dir: Path | None = None) -> WorkerCall[FileAnswer]:
    job = FileJob(
        reference=str(reference),
        report_dir=str(report_dir) if report_dir else None,
        python="/nonexistent/python-of-this-machine",
    )
    return WorkerCall(
        MODULE,
        job,
        FileAnswer,
        timeout_s=60,
        env={"PYTHONPATH": str(REPO)},
        cwd=reference.parent,
        label="the file worker",
    )
