"""Every command against every kind of bad input: the exit code, one readable line on stderr and
no traceback; under `--format json`, one valid JSON object on stdout with `diagnostics` and,
when the command failed, an `error`.

The commands run as a user runs them (a subprocess), so a FIFO that hung one would fail its
row by timeout instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.hostile.ncu_corrupt import variants

TESTS = Path(__file__).resolve().parents[1]
REPORT = TESTS / "fixtures" / "ncu" / "relu_bias_full.ncu-rep"
NON_UTF8 = os.fsdecode(b"caf\xe9_bad.py")  # a file name that is not UTF-8


@dataclass
class Row:
    name: str
    argv: list[str]
    rc: int
    says: str = ""  # a fragment of the one-line message (stderr)
    env: dict[str, str] = field(default_factory=dict)
    json: bool = True  # the command has --format json
    wrote_nothing: bool = False


LLM = "--coder llm --base-url http://127.0.0.1:9/v1 --verify compile"


def row(name: str, command: str, rc: int, says: str = "", **kw: object) -> Row:
    """A table row; `command` is split like a shell would, `{bad}` is the non-UTF-8 name."""
    argv = [NON_UTF8 if a == "{bad}" else a for a in shlex.split(command)]
    return Row(name, argv, rc, says, **kw)  # type: ignore[arg-type]


NOTHING = {"wrote_nothing": True}
TEXT = {"json": False}

ROWS = [
    row("check missing", "check missing.py", 2, "no such file"),
    row("check symlink loop", "check loop.py", 2, "symlink loop"),
    row("check fifo", "check fifo.py", 0),
    row("check /dev/zero", "check /dev/zero", 0),
    row("check binary", "check bin.cu", 0),
    row("check non-utf8 name", "check {bad}", 1),
    row("check hostile folder", "check .", 1),
    row("check bad setting", "check ref.py", 2, "STITCH_MAX_FILE_BYTES",
        env={"STITCH_MAX_FILE_BYTES": "lots"}),
    row("verify missing", "verify missing.py cand.py", 2, "no such file"),
    row("verify fifo", "verify fifo.py cand.py", 2, "FIFO"),
    row("verify /dev/zero", "verify /dev/zero cand.py", 2, "character device"),
    row("verify symlink loop", "verify ref.py loop.py", 2, "symlink loop"),
    row("verify folder", "verify folder cand.py", 2, "a folder"),
    row("verify --trials 0", "verify ref.py cand.py --trials 0", 2, "--trials"),
    row("verify --trials x", "verify ref.py cand.py --trials x", 2, "--trials"),
    row("verify --timeout -1", "verify ref.py cand.py --timeout -1", 2, "--timeout"),
    row("verify STITCH_TRIALS=abc", "verify ref.py cand.py", 2, "STITCH_TRIALS",
        env={"STITCH_TRIALS": "abc"}),
    row("verify non-utf8 names", "verify {bad} {bad}", 1, "static checks"),
    row("profile missing", "profile missing.py", 2, "no such file"),
    row("profile fifo", "profile fifo.py", 2, "FIFO"),
    row("profile --timeout -1", "profile ref.py --timeout -1", 2, "--timeout"),
    row("profile --launch-count 0", "profile ref.py --launch-count 0", 2, "--launch-count"),
    row("hints missing", "hints missing.ncu-rep", 2, "no such file"),
    row("hints fifo", "hints fifo.py", 2, "FIFO"),
    row("hints /dev/zero", "hints /dev/zero", 2, "character device"),
    row("hints truncated report", "hints truncated.ncu-rep", 2, "damaged or truncated"),
    row("hints empty report", "hints empty.ncu-rep", 2, "no profiled kernels"),
    row("hints bad --map", "hints truncated.ncu-rep --map nonsense", 2, "--map"),
    row("hints a good report", "hints good.ncu-rep", 0),
    row("hints --map to a fifo", "hints truncated.ncu-rep --map a=fifo.py", 2, "FIFO"),
    row("generate missing", "generate missing.py", 2, "no such file", **NOTHING),
    row("generate fifo", "generate fifo.py", 2, "FIFO", **NOTHING),
    row("generate symlink loop", "generate loop.py", 2, "symlink loop", **NOTHING),
    row("generate --max-attempts 0", "generate ref.py --max-attempts 0", 2, "--max-attempts",
        **NOTHING),
    row("generate --target-speedup -1", "generate ref.py --target-speedup -1", 2,
        "--target-speedup", **NOTHING),
    row("generate STITCH_MAX_ATTEMPTS=abc", "generate ref.py", 2, "STITCH_MAX_ATTEMPTS",
        env={"STITCH_MAX_ATTEMPTS": "abc"}, **NOTHING),
    row("generate -o missing/dir", "generate ref.py -o missing/dir/out.py --verify compile", 2,
        "does not exist", **NOTHING),
    row("generate -o existing", "generate ref.py -o cand.py --verify compile", 2,
        "never overwrites", **NOTHING),
    row("generate trajectories under a file",
        "generate ref.py --verify compile --trajectories-dir ref.py/traj", 2, "trajectories",
        **NOTHING),
    row("generate llm empty reference", f"generate empty.py {LLM}", 2, "empty", **NOTHING),
    row("generate llm Model-less reference", f"generate nomodel.py {LLM}", 2, "no class Model",
        **NOTHING),
    row("generate llm unparsable reference", f"generate broken.py {LLM}", 2, "does not parse",
        **NOTHING),
    row("generate llm without endpoint", "generate ref.py --coder llm --verify compile", 2,
        "--base-url", env={"STITCH_LLM_BASE_URL": ""}, **NOTHING),
    row("bench missing", "bench missing", 2, "no such folder"),
    row("bench empty folder", "bench folder", 2, "no problems"),
    row("bench --limit 0", "bench folder --limit 0", 2, "--limit"),
    row("export missing folder", "export-trajectories missing", 2, "no trajectory folder",
        **TEXT),
    row("export -o into a missing folder",
        "export-trajectories traj -o /nonexistent/x.jsonl", 2, "does not exist", **TEXT),
    row("export -o existing", "export-trajectories traj -o cand.py", 2, "--force", **TEXT),
    row("export non-UTF-8 and FIFO records", "export-trajectories traj", 0, "skipped", **TEXT),
    row("unknown command", "frobnicate", 2, "invalid choice", **TEXT),
    row("unknown option", "check ref.py --frob", 2, "unrecognized arguments"),
]  # fmt: skip


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-cli")
    shutil.copy(TESTS / "agents" / "data" / "scale_relu.py", root / "ref.py")
    (root / "cand.py").write_text("# a candidate that exists\n")
    (root / "empty.py").write_text("")
    (root / "nomodel.py").write_text("x = 1\n")
    (root / "broken.py").write_text("class Model(:\n    pass\n")
    (root / "bin.cu").write_bytes(b"__global__\x00\xff\xfe" * 4000)
    (root / NON_UTF8).write_text("class ModelNew(:\n    pass\n")
    os.mkfifo(root / "fifo.py")
    (root / "loop.py").symlink_to("loop.py")
    (root / "folder").mkdir()
    blobs = dict(variants(REPORT.read_bytes()))
    (root / "truncated.ncu-rep").write_bytes(blobs["truncated-50pct"])
    (root / "empty.ncu-rep").write_bytes(b"")
    shutil.copy(REPORT, root / "good.ncu-rep")
    traj = root / "traj"
    traj.mkdir()
    (traj / "bad.jsonl").write_bytes(b'{"schema": "x"}\n\xff\xfe not utf-8\n')
    os.mkfifo(traj / "pipe.jsonl")
    return root


def run(workspace: Path, row: Row, as_json: bool) -> subprocess.CompletedProcess[str]:
    argv = [*row.argv, "--format", "json"] if as_json else row.argv
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **row.env}
    env.pop("STITCH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "stitch_lsp", *argv],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=60,
    )


# Exit 1 from these is a failed verdict (not passed, nothing written), which JSON names in
# `error`; from `check` it means error-level findings, which are in `diagnostics`.
VERDICTS = {"verify", "generate", "profile", "hints"}


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_cli_row(workspace: Path, row: Row) -> None:
    """One run per row: under --format json where the command has it (stderr gets the same
    one-line message in both formats), as text otherwise."""
    before = sorted(os.listdir(workspace))
    proc = run(workspace, row, as_json=row.json)
    assert proc.returncode == row.rc, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    if row.says:
        assert row.says in proc.stderr, proc.stderr
    if row.rc == 2:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    if row.wrote_nothing:
        assert sorted(os.listdir(workspace)) == before
    if not row.json:
        return
    out = json.loads(proc.stdout)
    assert isinstance(out, dict) and isinstance(out["diagnostics"], list)
    if row.rc == 2 or (row.rc == 1 and row.argv[0] in VERDICTS):
        assert isinstance(out.get("error"), str) and out["error"], out
    else:
        assert "error" not in out


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folders_are_refused_before_the_run(workspace: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(workspace / "ref.py", ro / "ref.py")
    ro.chmod(0o555)
    try:
        row = Row("generate read-only", ["generate", str(ro / "ref.py"), "--verify", "compile"], 2)
        proc = run(workspace, row, as_json=False)
        assert proc.returncode == 2 and "read-only" in proc.stderr
        row = Row("export read-only", ["export-trajectories", "traj", "-o", str(ro / "x")], 2)
        proc = run(workspace, row, as_json=False)
        assert proc.returncode == 2 and "read-only" in proc.stderr
    finally:
        ro.chmod(0o755)


def test_read_only_outputs_are_refused_whoever_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same check as the skipped test above, for root too: os.access says read-only."""
    from stitch_lsp.cli.contract import UsageError, output_file, writable_folder

    monkeypatch.setattr(os, "access", lambda *_a, **_k: False)
    with pytest.raises(UsageError, match="read-only"):
        output_file(tmp_path / "out.py")
    with pytest.raises(UsageError, match="read-only"):
        writable_folder(tmp_path / "traj" / "deeper", "trajectories")
    assert not (tmp_path / "traj").exists()  # checked, not created


def test_non_utf8_names_survive_json(workspace: Path) -> None:
    proc = run(workspace, Row("", ["check", NON_UTF8], 1), as_json=True)
    out = json.loads(proc.stdout)
    assert os.fsencode(out["diagnostics"][0]["path"]) == os.fsencode(NON_UTF8)
    text = run(workspace, Row("", ["check", NON_UTF8], 1), as_json=False)
    assert "caf\\xe9_bad.py" in text.stdout
