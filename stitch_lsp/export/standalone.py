"""Standalone copies of generated files: the same kernels, no `stitch_lsp` import.

A generated file builds its CUDA through `stitch_lsp.runtime` (nvcc alone, ctypes launchers), so
it runs only where stitch-lsp is installed. Its standalone copy replaces each
`from stitch_lsp.runtime[.module] import name` with the definitions of those names, copied into
the file with everything they use:

- names that `stitch_lsp/export/inline_runtime.py` defines come from there: `load_cuda` over
  `torch.utils.cpp_extension.load_inline`, `check_launch`, `CudaLaunchError`;
- any other name comes from the runtime module that defines it (for example a Python helper that
  a later generator adds under `stitch_lsp/runtime/`), with its module-level dependencies, and
  recursively for what that module imports from `stitch_lsp`.

This works on the source text (ast), never by importing the runtime, so it runs in the server.
A form it cannot rewrite (`import stitch_lsp.runtime as rt`, an import inside a function) is an
`ExportError` that names the line: nothing half-converted is ever written.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from stitch_lsp.candidate_header import is_header_line

PACKAGE = "stitch_lsp"
RUNTIME = "stitch_lsp.runtime"
OVERRIDES = "stitch_lsp.export.inline_runtime"
STANDALONE_NOTE = (
    "# Standalone copy: builds with torch.utils.cpp_extension.load_inline and needs no stitch-lsp."
)


class ExportError(ValueError):
    """The file cannot be made standalone; the message says where and why."""


@dataclass
class _Module:
    """One module's source and which top-level statements define which names."""

    name: str
    source: str
    tree: ast.Module
    defines: dict[str, list[int]] = field(default_factory=dict)  # name -> statement indexes

    @classmethod
    def load(cls, name: str) -> _Module:
        path = _module_path(name)
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        module = cls(name, source, tree)
        for i, stmt in enumerate(tree.body):
            for bound in _bound_names(stmt):
                module.defines.setdefault(bound, []).append(i)
        return module

    def segment(self, index: int) -> str:
        stmt = self.tree.body[index]
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        lines = self.source.splitlines()
        return "\n".join(lines[start - 1 : stmt.end_lineno])


def _module_path(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ExportError(f"cannot find the source of {name}")
    return Path(spec.origin)


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, (ast.Try, ast.If)):
        return [name for s in ast.iter_child_nodes(stmt) if isinstance(s, ast.stmt)
                for name in _bound_names(s)]  # fmt: skip
    return []


def _used_names(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def _is_type_checking(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Name)
        and stmt.test.id == "TYPE_CHECKING"
    )


def _resolve(stmt: ast.ImportFrom, current: str) -> str:
    """The absolute module an import in module `current` names."""
    if stmt.level == 0:
        return stmt.module or ""
    is_package = _module_path(current).name == "__init__.py"
    package = current if is_package else current.rpartition(".")[0]
    return importlib.util.resolve_name("." * stmt.level + (stmt.module or ""), package)


def _unannotated(module: _Module, index: int) -> str:
    """The statement with every annotation turned into a string, as source (comments are lost,
    docstrings kept): what `from __future__ import annotations` does, which a copy cannot use.
    Annotations stay (dataclasses need them; a `ClassVar` string is still seen as one) but are
    never evaluated, so names only a type checker imports do not matter."""
    stmt = copy.deepcopy(module.tree.body[index])

    def text(node: ast.expr | None) -> ast.expr | None:
        return None if node is None else ast.Constant(ast.unparse(node))

    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = text(node.returns)
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    a.annotation = text(a.annotation)
        elif isinstance(node, ast.AnnAssign):
            node.annotation = text(node.annotation) or node.annotation
    return ast.unparse(ast.fix_missing_locations(stmt))


class _Inliner:
    """Collects, in dependency order, the statements that define the names a file imports."""

    def __init__(self) -> None:
        self.modules: dict[str, _Module] = {}
        self.chosen: list[tuple[str, int]] = []  # (module, statement index), dependencies first
        self.imports: list[str] = []  # plain import statements, deduplicated
        self.provided: dict[str, str] = {}  # name -> module that defines it (not imports)
        self.visited: set[str] = set()
        self.aliases: list[str] = []  # `b = a` for a runtime module's `import a as b`

    def module(self, name: str) -> _Module:
        if name not in self.modules:
            self.modules[name] = _Module.load(name)
        return self.modules[name]

    def provider(self, name: str, module: str) -> str:
        """Where `name`, as imported from `module`, is defined: the overrides first."""
        if name in self.module(OVERRIDES).defines:
            return OVERRIDES
        mod = self.module(module)
        if name not in mod.defines:
            raise ExportError(f"{module} defines no {name!r}")
        for i in mod.defines[name]:
            stmt = mod.tree.body[i]
            if isinstance(stmt, ast.ImportFrom) and not _is_future(stmt):
                target = _resolve(stmt, module)
                if target.startswith(PACKAGE):
                    alias = next(a for a in stmt.names if (a.asname or a.name) == name)
                    return self.provider(alias.name, target)
        return module

    def need(self, name: str, module: str, stack: tuple[str, ...] = ()) -> None:
        """Take the statements that define `name` in `module`, and what they use, first."""
        key = f"{module}:{name}"
        if key in self.visited:
            return
        self.visited.add(key)
        mod = self.module(module)
        for i in mod.defines.get(name, []):
            stmt = mod.tree.body[i]
            if _is_future(stmt) or _is_type_checking(stmt):
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self._take_import(stmt, name, module, (*stack, key))
                continue
            owner = self.provided.setdefault(name, module)
            if owner != module:
                raise ExportError(f"two runtime modules define {name!r} ({owner} and {module})")
            for used in sorted(_used_names(stmt) - {name}):
                if used in mod.defines:
                    self.need(used, module, (*stack, key))
            if (module, i) not in self.chosen:
                self.chosen.append((module, i))

    def _take_import(
        self, stmt: ast.Import | ast.ImportFrom, name: str, module: str, stack: tuple[str, ...]
    ) -> None:
        if isinstance(stmt, ast.ImportFrom):
            target = _resolve(stmt, module)
            alias = next(a for a in stmt.names if (a.asname or a.name) == name)
            if target.startswith(PACKAGE):
                self.need(alias.name, self.provider(alias.name, target), stack)
                if alias.asname and alias.asname != alias.name:
                    self.aliases.append(f"{alias.asname} = {alias.name}")
                return
            line = f"from {target} import {alias.name}" + (
                f" as {alias.asname}" if alias.asname else ""
            )
        else:
            alias = next(a for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
            if alias.name.startswith(PACKAGE):
                raise ExportError(f"{module} imports {alias.name}, which cannot be inlined")
            line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        if line not in self.imports:
            self.imports.append(line)

    def text(self) -> str:
        parts = ["\n".join(self.imports)] if self.imports else []
        for module, i in self.chosen:
            mod = self.modules[module]
            # Our overrides are written to run as they are; other modules' annotations may
            # name things only a type checker sees, so they become strings (KernelBench's
            # harness prepends lines to a candidate: no `from __future__ import annotations`).
            parts.append(mod.segment(i) if module == OVERRIDES else _unannotated(mod, i))
        if self.aliases:
            parts.append("\n".join(dict.fromkeys(self.aliases)))
        return "\n\n\n".join(parts) + "\n"


def runtime_imports(tree: ast.Module) -> tuple[list[ast.ImportFrom], list[str]]:
    """Top-level `from stitch_lsp.runtime... import` statements, and every other use of
    stitch_lsp that a standalone copy cannot have (as messages)."""
    top: list[ast.ImportFrom] = []
    problems: list[str] = []
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            if id(node) in top_level and (node.module or "").startswith(RUNTIME):
                if any(a.name == "*" for a in node.names):
                    problems.append(f"line {node.lineno}: `import *` from {node.module}")
                else:
                    top.append(node)
            else:
                problems.append(f"line {node.lineno}: `from {node.module} import ...`")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    problems.append(f"line {node.lineno}: `import {alias.name}`")
    return top, problems


def uses_runtime(text: str) -> bool:
    """Whether the file imports stitch_lsp.runtime (so an export has something to do)."""
    if "stitch_lsp" not in text:
        return False
    try:
        return bool(runtime_imports(ast.parse(text))[0])
    except SyntaxError:
        return False


def export_standalone(text: str) -> str:
    """The standalone form of a generated file's text (the text itself when it imports nothing
    of stitch_lsp). Raises ExportError."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ExportError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from exc
    imports, problems = runtime_imports(tree)
    if problems:
        raise ExportError("cannot inline " + "; ".join(problems))
    if not imports:
        return text  # it uses nothing of stitch-lsp: standalone already
    inliner = _Inliner()
    aliases: list[str] = []
    for node in imports:
        for alias in node.names:
            inliner.need(alias.name, inliner.provider(alias.name, node.module or RUNTIME))
            if alias.asname and alias.asname != alias.name:
                aliases.append(f"{alias.asname} = {alias.name}")
    skip = set(map(id, imports))
    own = {name for stmt in tree.body if id(stmt) not in skip for name in _bound_names(stmt)}
    inlined = {
        name
        for module, i in inliner.chosen
        for name in _bound_names(inliner.modules[module].tree.body[i])
    }
    clashes = sorted(own & inlined)
    if clashes:
        raise ExportError("the file defines names the inlined runtime needs: " + ", ".join(clashes))
    block = (
        "# ---- inlined from stitch_lsp.runtime: what this file uses of it ----\n"
        + inliner.text()
        + ("\n" + "\n".join(aliases) + "\n" if aliases else "")
        + "# ---- end of the inlined runtime ----"
    )
    lines = text.splitlines()
    removed = {
        n for node in imports for n in range(node.lineno - 1, node.end_lineno or node.lineno)
    }
    at = imports[0].lineno - 1
    kept = [line for n, line in enumerate(lines) if n not in removed]
    out = "\n".join([*kept[:at], block, *kept[at:]]).rstrip() + "\n"
    out = _with_note(out)
    check_standalone(out)
    return out


def _with_note(text: str) -> str:
    lines = text.splitlines()
    at = 1 if lines and is_header_line(lines[0]) else 0
    return "\n".join([*lines[:at], STANDALONE_NOTE, *lines[at:]]) + "\n"


def check_standalone(text: str) -> None:
    """Raise ExportError unless `text` parses and imports nothing from stitch_lsp."""
    tree = ast.parse(text)
    imports, problems = runtime_imports(tree)
    if imports or problems:
        raise ExportError("the copy still imports stitch_lsp: " + "; ".join(problems))
