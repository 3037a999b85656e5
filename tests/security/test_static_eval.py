"""The static build reads call arguments as literals and never runs them (issue 17, security 2).

Without a GPU (or without torch) the Verifier builds what `load_cuda(...)` inside `forward`
would build. It used to `eval` those arguments, so `load_cuda(SRC + str(__import__("os")
.system(...)))` ran the command.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from stitch_lsp.config import Settings
from stitch_lsp.models.verify import VerifyRequest
from stitch_lsp.verify.client import run_worker
from stitch_lsp.verify.literals import NotLiteral, literal_value, module_literals

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parents[1] / "verify" / "data"

EXPLOIT = """\
import torch
import torch.nn as nn
from stitch_lsp.runtime import load_cuda

SRC = "// no kernels here\\n"


class ModelNew(nn.Module):
    def forward(self, x, bias):
        lib = load_cuda(SRC + str(__import__("os").system("touch {mark}")), name="x")
        return x
"""


def _expr(text: str) -> ast.expr:
    node = ast.parse(text, mode="eval").body
    return node


@pytest.mark.parametrize(
    "text",
    [
        'SRC + str(__import__("os").system("touch /tmp/x"))',
        '__import__("os").system("id")',
        "open('/etc/passwd').read()",
        "SRC.replace('a', 'b')",
        "f'{SRC.upper()}'",
        "[x for x in SRC]",
        "SRC * 10",
        "lambda: 0",
        "{**OPTS}",
        "f'{SRC:>9999999}'",
    ],
)
def test_code_is_never_a_literal(text: str) -> None:
    with pytest.raises(NotLiteral):
        literal_value(_expr(text), {"SRC": "abc", "OPTS": {}})


def test_literals_and_names_bound_to_them() -> None:
    names = {"HEAD": "#include <x>\n", "BODY": "int f();", "N": 4, "FLAGS": ["-O3"]}
    assert literal_value(_expr("HEAD + BODY"), names) == "#include <x>\nint f();"
    assert literal_value(_expr("f'{HEAD}{N:03d}!'"), names) == "#include <x>\n004!"
    assert literal_value(_expr("FLAGS + ['-lineinfo']"), names) == ["-O3", "-lineinfo"]
    assert literal_value(_expr("{'a': (1, -2.5), 'b': None}"), names) == {
        "a": (1, -2.5),
        "b": None,
    }
    with pytest.raises(NotLiteral):
        literal_value(_expr("len"), {"len": len})  # a name bound to a function


def test_module_literals_fold_in_order_and_forget_rebound_names() -> None:
    tree = ast.parse("A = 'x'\nB = A + 'y'\nC: str = B + A\nA = compute()\nD = A\n")
    assert module_literals(tree) == {"B": "xy", "C": "xyx"}


def _exploit(tmp_path: Path) -> tuple[Path, Path]:
    mark = tmp_path / "MARK"
    cand = tmp_path / "cand_exploit.py"
    cand.write_text(EXPLOIT.format(mark=mark))
    return cand, mark


def test_worker_without_torch_skips_the_call_and_says_so(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch hidden for this test')\n")
    cand, mark = _exploit(tmp_path)
    req = VerifyRequest(reference=str(DATA / "ref_bias_relu.py"), candidate=str(cand))
    res = run_worker(
        req,
        python=sys.executable,
        env={"PYTHONPATH": str(fake.parent), "CUDA_VISIBLE_DEVICES": ""},
        timeout_s=120,
    )
    assert res.phase == "done", (res.message, res.log_tail)
    assert "torch is not installed" in res.message
    assert not mark.exists()
    skipped = [d for d in res.diagnostics if d.code == "stitch.static-build-skipped"]
    assert skipped and skipped[0].line == 10 and "nothing of it was run" in skipped[0].message


def test_compile_only_with_torch_skips_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    from stitch_lsp.verify import verify

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cand, mark = _exploit(tmp_path)
    res = verify(DATA / "ref_bias_relu.py", cand, Settings(verify_timeout_s=120))
    assert res.phase == "done", (res.message, res.log_tail)
    assert not mark.exists()
    assert any(d.code == "stitch.static-build-skipped" for d in res.diagnostics)
