"""CPU: submodule and parameter names are data in the generated code, never code.

The reference sets names with setattr (`block1-0`, `class`, spaces, quotes, newlines, and one
that is a Python expression running a shell command). The candidate must parse, reach every
tensor by its name, and building its table of tensors must not run the expression.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .helpers import generate_for, import_path, write_problem

torch = pytest.importorskip("torch")

MARKER = "stitch_injected"  # created in the working folder if a name ever runs as code
# Pasted after `self.net[0].` into a list, as names once were, this runs `touch`.
INJECTION = f"training, getattr(__import__('os'), 'system')('touch {MARKER}'), self"
# torch.fx traces these (its own code generation quotes them as getattr strings).
FX_NAMES = ("block1-0", "a name with spaces", "0", INJECTION)
# These break torch.fx's code generation (a keyword, quotes, newlines): capture goes via ATen.
ATEN_NAMES = ("class", "quotes ' \" ''' \"\"\" \\", "new\nline\r\n# comment", INJECTION)
NORM = f"norm {MARKER}"
FX_BIAS = "bias 'b'"
ATEN_BIAS = "bias\n'''"


def reference(names: tuple[str, ...], bias: str, norm: bool) -> str:
    result = f"getattr(inner, {NORM!r})(x)" if norm else "x"
    return f"""import torch
import torch.nn as nn

NAMES = {names!r}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        inner = nn.Module()
        for name in NAMES:
            setattr(inner, name, nn.Linear(8, 8))
        setattr(inner, {bias!r}, nn.Parameter(torch.randn(8)))
        setattr(inner, {NORM!r}, nn.BatchNorm1d(8))
        self.net = nn.Sequential(inner)

    def forward(self, x):
        inner = self.net[0]
        for name in NAMES:
            x = torch.relu(getattr(inner, name)(x))
        x = x + getattr(inner, {bias!r})
        return {result}


def get_inputs():
    return [torch.randn(5, 8)]


def get_init_inputs():
    return []
"""


def _calls_of(tree: ast.AST) -> set[str]:
    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def _generate_and_look_up(
    tmp_path: Path, names: tuple[str, ...], bias: str, norm: bool
) -> tuple[ast.Module, list[object]]:
    """Generate for the reference, import the candidate, build ModelNew, read its tensors."""
    ref = write_problem(tmp_path, "hostile_names", reference(names, bias, norm))
    cand = generate_for(ref)
    assert cand.handled, cand.reason
    assert cand.source is not None
    tree = ast.parse(cand.source)
    assert "__import__" not in _calls_of(tree)  # the expression is only ever a string
    assert "system" not in {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    path = tmp_path / "hostile_names_stitch.py"
    path.write_text(cand.source)
    model = import_path(path, f"hostile_names_stitch_{norm}").ModelNew()
    leaves = model._stitch_params()
    assert not (tmp_path / MARKER).exists()
    inner = model.net[0]
    expected = [getattr(inner, n).weight for n in names] + [getattr(inner, n).bias for n in names]
    expected.append(getattr(inner, bias))
    ids = {id(t) for t in leaves}
    assert all(id(t) in ids for t in expected)
    return tree, leaves


def test_names_torch_fx_traces_are_looked_up_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree, leaves = _generate_and_look_up(tmp_path, FX_NAMES, FX_BIAS, norm=True)
    # The training-mode check names the norm by a string too.
    looked_up = {
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "get_submodule"
        and isinstance(n.args[0], ast.Constant)
    }
    assert f"net.0.{NORM}" in looked_up
    assert len(leaves) == 2 * len(FX_NAMES) + 1 + 5  # + the norm's affine, stats and counter


def test_names_with_quotes_and_newlines_are_looked_up_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, leaves = _generate_and_look_up(tmp_path, ATEN_NAMES, ATEN_BIAS, norm=False)
    assert len(leaves) == 2 * len(ATEN_NAMES) + 1


def test_dotted_expression_name_is_refused_without_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name with dots cannot be told from a path: refused before tracing, and nothing runs."""
    monkeypatch.chdir(tmp_path)
    dotted = f"__import__('os').system('touch {MARKER}')"
    cand = generate_for(
        write_problem(tmp_path, "dotted_name", reference((dotted,), FX_BIAS, False))
    )
    assert not cand.handled
    assert cand.reason is not None and "has a dot in its name" in cand.reason
    assert not (tmp_path / MARKER).exists()


def test_display_and_comment_text_cannot_end_a_comment_or_string() -> None:
    from stitch_lsp.compiler.attr_path import comment_text, display_path

    assert display_path("net.0.block1-0.weight") == "self.net[0]['block1-0'].weight"
    assert display_path("layers.0.class") == "self.layers[0]['class']"
    shown = display_path("a.new\nline'''.w")
    assert "\n" not in shown and "'''" not in shown
    text = comment_text("self.x\n'''\"\"\" \\ (line 3)")
    assert "\n" not in text and "'''" not in text and '"""' not in text
    assert not text.endswith("\\")  # a C++ `//` comment would swallow the next line
    for wrapper in ("# {}\n", '"""{}"""\n', "x = r'''{}'''\n"):
        ast.parse(wrapper.format(text))  # a comment, a docstring, the raw CUDA string


PLAIN = reference(("fc",), FX_BIAS, norm=False)


def test_a_space_in_the_reference_name_is_quoted_in_the_header(tmp_path: Path) -> None:
    from stitch_lsp.candidate_header import find_reference

    cand = generate_for(write_problem(tmp_path, "my problem", PLAIN))
    assert cand.handled, cand.reason
    assert cand.source is not None
    assert cand.source.startswith('# stitch-lsp: reference="my problem.py"\n')
    assert find_reference(cand.source) == "my problem.py"
    tree = ast.parse(cand.source)
    assert isinstance(tree.body[0], ast.Expr)  # the docstring still comes first


def test_a_newline_in_the_reference_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    name = f"p\nimport os; os.system('touch {MARKER}')\n"
    cand = generate_for(write_problem(tmp_path, name, PLAIN))
    assert not cand.handled
    assert cand.reason is not None and "control character U+000A" in cand.reason
    assert cand.source is None
    assert not (tmp_path / MARKER).exists()


@pytest.mark.parametrize(
    "name",
    [
        'x"), getattr(__import__("os"), "system")("touch stitch_injected"), getattr(self, "y',
        "class",
        "back\\slash",
    ],
)
def test_the_step_by_step_scaffold_refuses_names_fx_would_paste(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from stitch_lsp.agents.worker.scaffold import ScaffoldError, build

    monkeypatch.chdir(tmp_path)
    inner = torch.nn.Module()
    setattr(inner, name, torch.nn.Linear(4, 4))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return getattr(self.inner, name)(x)

    graph = torch.fx.Tracer().trace(Net())  # the graph alone: fx's own module would paste it
    gm = type("Traced", (), {"graph": graph})()
    with pytest.raises(ScaffoldError, match="cannot be written into a scaffold"):
        build(gm, "", [], {}, {})
    assert not (tmp_path / MARKER).exists()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("case", ["fx", "aten"])
def test_hostile_names_run_and_match_the_reference_on_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    from .test_gpu_correctness import _check

    monkeypatch.chdir(tmp_path)
    if case == "fx":
        source = reference(FX_NAMES, FX_BIAS, norm=True)  # training-mode norm: stats updated
    else:
        source = reference(ATEN_NAMES, ATEN_BIAS, norm=False)
    _check(tmp_path, f"hostile_{case}", source)
    assert not (tmp_path / MARKER).exists()
