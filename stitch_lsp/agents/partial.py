"""Partial programs: the reference's flat forward with one block per subtask (torch-free).

A block is the statements of one subtask's fusion group between two markers:

        # >>> stitch k2 · subtask 2/3: linear+relu
        fc2 = self.fc2(relu)
        relu_1 = torch.relu(fc2)
        # <<< stitch k2

It stays PyTorch until its subtask replaces it with CUDA. The markers let a later step find the
block again (the builtin generator's code is spliced in there), and tell the Coder which lines
are its subtask's.

Builtin seeding works on subproblems: the statements of one block become a KernelBench-format
problem of their own (its Model holds the reference's modules, its inputs have the block's input
shapes), which the builtin generator either handles or refuses. Its candidate is spliced into the
block under a private prefix; the spliced code shares the model's modules and parameters.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from stitch_lsp.models.agents import ForwardScaffold, ScaffoldStatement, Subtask

OPEN = "# >>> stitch "
CLOSE = "# <<< stitch "
_OPEN_RE = re.compile(r"^(?P<indent>[ \t]*)# >>> stitch (?P<group>\S+)")
_CLOSE_RE = re.compile(r"^[ \t]*# <<< stitch (?P<group>\S+)")
_SELF_ATTR = re.compile(r"\bself\.(\w+)")
_BODY = " " * 8
_FLOAT_DTYPES = {"float32", "float64", "float16", "bfloat16"}
_LOADER_CALL = re.compile(r"\b(load_cuda|load_inline|load)\(")


def region(scaffold: ForwardScaffold, subtask: Subtask) -> tuple[int, int] | None:
    """Indices [first, last] of the subtask's statements in the scaffold, or None."""
    index = {s.node: i for i, s in enumerate(scaffold.statements)}
    at = [index[o.node] for o in subtask.ops if o.node in index]
    if not at or len(at) != len(subtask.ops):
        return None
    return min(at), max(at)


def block_io(scaffold: ForwardScaffold, subtask: Subtask) -> tuple[list[str], list[str]]:
    """(values the block reads from before it, values it defines that are used after it)."""
    span = region(scaffold, subtask)
    if span is None:
        return [], []
    first, last = span
    inside = scaffold.statements[first : last + 1]
    defined = {s.node for s in inside}
    reads: list[str] = []
    for s in inside:
        reads += [a for a in s.args if a not in defined and a not in reads]
    later: set[str] = set(scaffold.output_args)
    for s in scaffold.statements[last + 1 :]:
        later.update(s.args)
    return reads, [s.node for s in inside if s.node in later]


def compose(scaffold: ForwardScaffold, subtasks: list[Subtask]) -> str:
    """The all-PyTorch ModelNew, with one marked block per subtask (none for an empty list)."""
    starts: dict[int, Subtask] = {}
    ends: dict[int, Subtask] = {}
    for st in subtasks:
        span = region(scaffold, st)
        if span is not None:
            starts[span[0]] = st
            ends[span[1]] = st
    lines: list[str] = []
    if starts:
        lines += [
            "# Partial program of a step-by-step run. Each `# >>> stitch kN` ... `# <<< stitch kN`",
            "# block is one subtask's fusion group: PyTorch until its subtask writes it in CUDA.",
        ]
    lines += [scaffold.prelude.rstrip(), "", f"    {scaffold.signature}"]
    for i, s in enumerate(scaffold.statements):
        if i in starts:
            st = starts[i]
            lines.append(f"{_BODY}{OPEN}{st.group} · subtask {st.index}/{st.total}: {st.label}")
        lines.append(_statement(s))
        if i in ends:
            lines.append(f"{_BODY}{CLOSE}{ends[i].group}")
    lines.append(f"{_BODY}{scaffold.returns}")
    return "\n".join(lines) + "\n"


def _statement(s: ScaffoldStatement) -> str:
    where = f"  # line {s.line}" if s.line is not None else ""
    return f"{_BODY}{s.code}{where}"


def find_block(program: str, group: str) -> tuple[int, int, str] | None:
    """(open line index, close line index, indent) of `group`'s block in `program`."""
    lines = program.splitlines()
    start = None
    indent = ""
    for i, line in enumerate(lines):
        m = _OPEN_RE.match(line)
        if m and m.group("group") == group and start is None:
            start, indent = i, m.group("indent")
            continue
        c = _CLOSE_RE.match(line)
        if c and c.group("group") == group and start is not None:
            return start, i, indent
    return None


def has_blocks(program: str) -> bool:
    return any(_OPEN_RE.match(line) for line in program.splitlines())


# ---------------------------------------------------------------- builtin seeding


@dataclass
class Subproblem:
    """One block as a KernelBench-format problem of its own, for the builtin generator."""

    group: str
    source: str
    inputs: list[str]
    outputs: list[str]
    attrs: list[str]


def subproblem(scaffold: ForwardScaffold, subtask: Subtask, reference: Path) -> Subproblem | None:
    """The block of `subtask` as a problem file's text; None when it cannot stand alone (an
    input that is not one floating-point tensor of known shape, or no outputs)."""
    span = region(scaffold, subtask)
    if span is None:
        return None
    inputs, outputs = block_io(scaffold, subtask)
    if not outputs:
        return None
    metas = {i.name: i.meta for i in scaffold.inputs}
    metas.update({s.node: s.meta for s in scaffold.statements})
    shapes = []
    for name in inputs:
        meta = metas.get(name)
        if meta is None or meta.dtype not in _FLOAT_DTYPES:
            return None
        shapes.append(f"torch.randn({tuple(meta.shape)!r}, dtype=torch.{meta.dtype})")
    first, last = span
    body = [s.code for s in scaffold.statements[first : last + 1]]
    attrs = sorted({a for line in body for a in _SELF_ATTR.findall(line)} - {"training"})
    ret = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ",)"
    params = "".join(f", {a}" for a in attrs)
    source = "\n".join(
        [
            f'"""Subproblem {subtask.group} of {reference.name}: {subtask.label}."""',
            "",
            "import importlib.util",
            "",
            "import torch",
            "",
            "",
            "class Model(torch.nn.Module):",
            f"    def __init__(self{params}):",
            "        super().__init__()",
            *(f"        _share(self, {a!r}, {a})" for a in attrs),
            "",
            f"    def forward(self, {', '.join(inputs)}):",
            *(f"        {line}" for line in body),
            f"        return {ret}",
            "",
            "",
            "def _share(module, name, value):",
            "    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):",
            "        module.register_buffer(name, value)",
            "    else:",
            "        setattr(module, name, value)",
            "",
            "",
            "def _reference():",
            f"    path = {str(reference)!r}",
            "    spec = importlib.util.spec_from_file_location('stitch_whole', path)",
            "    module = importlib.util.module_from_spec(spec)",
            "    spec.loader.exec_module(module)",
            "    return module",
            "",
            "",
            "def get_init_inputs():",
            "    ref = _reference()",
            "    torch.manual_seed(42)",
            "    whole = ref.Model(*ref.get_init_inputs())",
            f"    return [getattr(whole, name) for name in {attrs!r}]",
            "",
            "",
            "def get_inputs():",
            f"    return [{', '.join(shapes)}]",
            "",
        ]
    )
    return Subproblem(subtask.group, source, inputs, outputs, attrs)


@dataclass
class GroupSeed:
    """The builtin generator's candidate for one subtask's subproblem."""

    sub: Subproblem
    candidate: str


_SHARE = '''

def _stitch_share(sub, model, name):
    """Let a spliced group's module read the model's own module, parameter or buffer."""
    value = getattr(model, name)
    if isinstance(value, torch.nn.Module):
        sub._modules[name] = value
    elif isinstance(value, torch.nn.Parameter):
        sub._parameters[name] = value
    elif name in model._buffers:
        sub._buffers[name] = value
    else:
        object.__setattr__(sub, name, value)
'''


def _prefix(group: str) -> str:
    return "_stitch_" + re.sub(r"\W", "_", group) + "_"


def _rename(source: str, names: set[str], prefix: str) -> str:
    """`source` with every reference to a module-level name in `names` prefixed; attribute
    names, keywords and strings untouched (token positions, so the layout stays as it was)."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    previous = ""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string in names and previous != ".":
            edits.append((tok.start[0] - 1, tok.start[1], tok.string))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for row, col, name in reversed(edits):
        line = lines[row]
        lines[row] = line[:col] + prefix + name + line[col + len(name) :]
    return "".join(lines)


def splice(program: str, subtask: Subtask, candidate: str, sub: Subproblem) -> str | None:
    """`program` with `subtask`'s block replaced by a call into the builtin generator's
    `candidate` for its subproblem; None when the block or the candidate's shape is not there."""
    block = find_block(program, subtask.group)
    if block is None:
        return None
    try:
        tree = ast.parse(candidate)
    except SyntaxError:
        return None
    defined: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if "ModelNew" not in defined:
        return None
    loaders = sorted(
        f"{_prefix(subtask.group)}{stmt.name}"
        for stmt in tree.body
        if isinstance(stmt, ast.FunctionDef)
        and not (stmt.args.posonlyargs or stmt.args.args or stmt.args.kwonlyargs)
        and _LOADER_CALL.search(ast.unparse(stmt))
    )
    prefix = _prefix(subtask.group)
    renamed = _rename(candidate, defined, prefix)
    src_lines = renamed.splitlines()
    keep: list[str] = []
    for stmt in ast.parse(renamed).body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the module docstring
        end = stmt.end_lineno or stmt.lineno
        keep.append("\n".join(src_lines[stmt.lineno - 1 : end]))
    cls = f"{prefix}ModelNew"
    maker = [
        "",
        "",
        f"def {prefix}group(model):",
        f'    """Group {subtask.group} ({subtask.label}): the builtin generator\'s kernels, run',
        '    on the model\'s own modules and parameters."""',
        f'    sub = model.__dict__.get("{prefix}module")',
        "    if sub is None:",
        f"        sub = {cls}.__new__({cls})",
        "        torch.nn.Module.__init__(sub)",
        *(f"        _stitch_share(sub, model, {a!r})" for a in sub.attrs),
        f'        model.__dict__["{prefix}module"] = sub',
        *(f"    {name}()  # its kernels: built once, then cached" for name in loaders),
        "    sub.training = model.training",
        "    return sub",
    ]
    header = [
        "",
        f"# ---- group {subtask.group} ({subtask.label}): the builtin generator's code for it",
        *keep,
        *maker,
        "",
        "",
    ]
    if "def _stitch_share(" not in program:
        header = [*_SHARE.splitlines(), *header]
    open_at, close_at, indent = block
    lines = program.splitlines()
    assigned = ", ".join(sub.outputs)
    call = f"{indent}{assigned} = {prefix}group(self)({', '.join(sub.inputs)})"
    opened = f"{indent}{OPEN}{subtask.group} · subtask {subtask.index}/{subtask.total}: "
    opened += f"{subtask.label} (builtin kernels)"
    lines[open_at : close_at + 1] = [opened, call, f"{indent}{CLOSE}{subtask.group}"]
    cls_at = next((i for i, ln in enumerate(lines) if re.match(r"class ModelNew\b", ln)), None)
    if cls_at is None:
        return None
    lines[cls_at:cls_at] = header
    return "\n".join(lines) + "\n"
