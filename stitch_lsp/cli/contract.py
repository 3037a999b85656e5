"""What every subcommand shares: one-line errors, `--format json`, checked arguments and paths.

The contract, for scripts: a bad argument, setting or path is one line on stderr and exit code 2,
before any work starts; with `--format json` (or its alias `--json`) stdout always holds one JSON
object with a `diagnostics` list, and, when the command failed, an `error` string. Nothing a
user types reaches them as a traceback (`STITCH_DEBUG=1` shows it).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from stitch_lsp.files import display_path

if TYPE_CHECKING:
    from rich.console import Console

# Width of rich output that goes to a file or a pipe: wide enough that no line, table or path
# is ever split, since a script or a log reader cannot undo the wrap.
PLAIN_WIDTH = 10_000


class UsageError(Exception):
    """A bad argument, setting or path, found before any work started: exit code 2."""


class CommandParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block), as JSON too under `--format json`."""

    argv: Sequence[str] | None = None  # the command line being parsed (set by `cli.main`)

    def error(self, message: str) -> NoReturn:
        argv = CommandParser.argv if CommandParser.argv is not None else sys.argv[1:]
        report_error(f"{self.prog}: {message}", wants_json(argv))
        raise SystemExit(2)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (used before it is parsed)."""
    for i, arg in enumerate(argv):
        if arg in ("--json", "--format=json"):
            return True
        if arg == "--format" and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
    return False


def add_format(parser: argparse.ArgumentParser) -> None:
    """`--format text|json`, with `--json` as the short spelling of `--format json`."""
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )


def dumps(payload: Any) -> str:
    """JSON text of plain data. A file name that is not UTF-8 (held as surrogate escapes)
    becomes a \\udcXX escape, which JSON allows, instead of failing the whole output."""
    return json.dumps(payload, indent=2)


def emit_json(payload: dict[str, Any]) -> None:
    """Print one JSON object in the shared shape (`diagnostics` first, always present)."""
    out = {"diagnostics": payload.pop("diagnostics", None) or [], **payload}
    print(dumps(out), flush=True)


def report_error(
    message: str, as_json: bool, diagnostics: list[dict[str, Any]] | None = None, **extra: Any
) -> None:
    """One line on stderr; with JSON output, the same as a JSON object on stdout."""
    line = " ".join(message.split())  # one line, whatever the message held
    print(line, file=sys.stderr, flush=True)
    if as_json:
        emit_json({"diagnostics": diagnostics or [], "error": line, **extra})


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A rich Console for command output. On a terminal, rich's own width (or `COLUMNS`);
    on a file or a pipe, lines as long as they are: no wrap at 80 columns, no path cut in two
    (a `COLUMNS` set there still sizes tables, but a line of text is never broken)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if not stream.isatty():
        options.setdefault("soft_wrap", True)
        if "COLUMNS" not in os.environ:
            options.setdefault("width", PLAIN_WIDTH)
    return Console(stderr=stderr, **options)


# ---- argument types ---------------------------------------------------------------------------


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"wants a number {span}, got {value}")
        return value

    parse.__name__ = "number"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number, got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"wants a number above 0, got {text}")
    return value


# ---- settings and paths -----------------------------------------------------------------------


def load_settings(**overrides: Any) -> Any:
    """Settings from the environment and flags; a bad value is a UsageError naming it."""
    from pydantic import ValidationError

    from stitch_lsp.config import Settings

    try:
        return Settings.from_sources(**overrides)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err.get("loc", ())) or "settings"
            env = f"STITCH_{name.upper()}"
            where = f"{env}={os.environ[env]!r}" if env in os.environ else name
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        raise UsageError("invalid setting: " + "; ".join(problems)) from None
    except ValueError as exc:  # a settings layer that names the variable itself
        raise UsageError(f"invalid setting: {' '.join(str(exc).split())}") from None


def why_unreadable(path: Path) -> str | None:
    """Why `path` cannot be read as a source file (missing, a loop, a FIFO...), or None."""
    from stitch_lsp.files import kind_of

    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno == errno.ENOENT:
            return "no such file"
        return exc.strerror or str(exc)
    import stat as stat_mod

    if not stat_mod.S_ISREG(st.st_mode):
        return f"{kind_of(st.st_mode)}, not a regular file"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied)"
    return None


def input_file(path: Path, what: str = "file") -> Path:
    """`path` if it is a readable regular file, else a UsageError saying why."""
    why = why_unreadable(path)
    if why is not None:
        raise UsageError(f"{what} {display_path(path)}: {why}")
    return path


def output_file(path: Path, *, may_exist: bool = False) -> Path:
    """Check before a run that `path` can be created: its folder exists and is writable, and
    (unless `may_exist`) nothing is there yet. A UsageError says what is wrong."""
    shown = display_path(path)
    if not may_exist and (path.exists() or path.is_symlink()):
        raise UsageError(
            f"{shown} already exists; stitch-lsp never overwrites a file "
            "(choose another output, or leave it out to get a free name)"
        )
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"cannot write {shown}: the folder {display_path(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {shown}: the folder {display_path(folder)} is read-only")
    return path


def writable_folder(path: Path, what: str) -> Path:
    """Check before a run that `path` is a writable folder or can be created as one (its
    nearest existing ancestor is a writable folder). Nothing is created here."""
    shown = display_path(path)
    probe = path
    while not (probe.exists() or probe.is_symlink()):
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        why = (
            "is not a folder"
            if probe == path
            else f"cannot be created: {display_path(probe)} is not a folder"
        )
        raise UsageError(f"the {what} folder {shown} {why}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(
            f"the {what} folder {shown} cannot be written: {display_path(probe)} is read-only"
        )
    return path
