"""The layers: a package imports only from its own layer or the ones below it.

The CLI is two things: `cli.contract` (what every subcommand shares: errors, `--format json`,
checked paths) sits at the bottom beside `files`; `cli.main` (the dispatcher) sits at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import stitch_lsp

LAYERS: list[set[str]] = [
    {
        "__version__",
        "config",
        "files",
        "gpus",
        "models",
        "candidate_header",
        "cli.contract",
        "cuda_macros",
    },
    {"candidate_files", "runtime", "prompts"},
    {"workers"},
    {"compiler", "analysis", "cluster", "export"},
    {"verify", "profile"},
    {"agents"},
    {"server"},
    {"cli.main", "__main__", "cli"},
]
ROOT = Path(stitch_lsp.__file__).parent


def _unit(module: str) -> str:
    """The layered unit a dotted module belongs to (`stitch_lsp.verify.worker.gpu` -> verify)."""
    parts = module.split(".")[1:]
    if not parts:
        return "__version__"
    if parts[0] == "cli" and len(parts) > 1:
        return f"cli.{parts[1]}"
    return parts[0]


def _layer(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS")


def _parse(text: str) -> ast.Module:
    """ast.parse, again when CPython raises its spurious "AST constructor recursion depth
    mismatch" (seen on 3.11.7, CPython issue 106905): the counter is shared by every thread, so
    a parse in a thread an earlier test left running can upset this one."""
    for _ in range(5):
        try:
            return ast.parse(text)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
    return ast.parse(text)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "stitch_lsp":
                found |= {f"stitch_lsp.{a.name}" for a in node.names}
            elif node.module.startswith("stitch_lsp."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("stitch_lsp.")}
    return found


def test_no_import_runs_up_the_layers() -> None:
    upward: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        here = ".".join(("stitch_lsp", *path.relative_to(ROOT).with_suffix("").parts))
        here = here.removesuffix(".__init__")
        mine = _layer(_unit(here))
        for target in _imports(path):
            if _layer(_unit(target)) > mine:
                upward.append(f"{here} -> {target}")
    assert not upward, "\n".join(upward)
