"""A refusal names the library line that runs the unsupported op, besides the reference line.

A model from a library is called by one line of the reference (`return self.model(x)`), so that
line alone does not say what to change. The "library" here is a module written beside the
reference; the last test uses transformers where it is installed.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from stitch_lsp.compiler.worker.converter import library_frame, short_path
from stitch_lsp.compiler.worker.generate import generate

LIB = "scan_lib"

# Line numbers below are the ones these sources have (counted from 1).
LIB_SOURCE = """\
import torch


def scan(x):
    y = x * 2
    return torch.cumprod(y, dim=1)


def rolled(x):
    return torch.roll(x, 1)


def gate(x):
    if x.sum() > 0:
        return x
    return -x


class Broken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("no such width")


def double(x):
    return x * 2
"""

INPUTS = """

def get_inputs():
    return [torch.randn(2, 4, 16)]


def get_init_inputs():
    return []
"""


def reference(body: str) -> str:
    """A KernelBench file whose class body is `body` (from line 8), with `scan_lib` imported."""
    head = f"import torch\nimport torch.nn as nn\n\nimport {LIB}\n\n\nclass Model(nn.Module):\n"
    return head + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ") + INPUTS


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tmp_path with the library in it and importable, forgotten again afterwards."""
    (tmp_path / f"{LIB}.py").write_text(LIB_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(LIB, None)
    yield tmp_path
    sys.modules.pop(LIB, None)


def refusal(folder: Path, body: str) -> str:
    path = folder / "ref.py"
    path.write_text(reference(body))
    cand = generate(path, path.name)
    assert not cand.handled and cand.reason is not None
    return cand.reason


def test_an_op_in_a_library_names_the_library_line_and_the_reference_line(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            x = x + 1
            return scan_lib.scan(x)
        """,
    )
    assert reason == (
        "cumprod (at scan_lib.py:6, called from line 10) is not supported by the builtin coder"
    )


def test_an_op_in_the_reference_itself_is_refused_as_before(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            x = scan_lib.double(x)
            return torch.cumprod(x, dim=1)
        """,
    )
    assert reason == "cumprod (line 10) is not supported by the builtin coder"


def test_a_refusal_the_builder_raises_names_the_library_line(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            return scan_lib.rolled(x) + 1
        """,
    )
    assert reason.startswith("roll (at scan_lib.py:10, called from line 9): roll without dims")


def test_a_trace_failure_in_a_library_names_the_library_line(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            x = x + 1
            return scan_lib.gate(x)
        """,
    )
    assert reason.startswith("ATen-level capture failed: ")
    assert reason.endswith(" (at scan_lib.py:14, called from line 10)"), reason


def test_a_constructor_failing_in_a_library_names_the_library_line(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def __init__(self):
            super().__init__()
            self.b = scan_lib.Broken()

        def forward(self, x):
            return x
        """,
    )
    assert reason.startswith(
        "building the model failed: ValueError: no such width "
        "(at scan_lib.py:22, called from line 10)"
    ), reason


def test_library_paths_are_shown_short(tmp_path: Path) -> None:
    ref = str(tmp_path / "ref.py")
    site = "/opt/venv/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py"
    assert short_path(site, ref) == "transformers/models/gpt2/modeling_gpt2.py"
    dist = "/usr/lib/python3/dist-packages/timm/layers/mlp.py"
    assert short_path(dist, ref) == "timm/layers/mlp.py"
    assert short_path(str(tmp_path / "pkg" / "lib.py"), ref) == "pkg/lib.py"
    home = Path.home() / "src" / "mylib" / "layers.py"
    if not home.is_relative_to(tmp_path):
        assert short_path(str(home), ref) == "~/src/mylib/layers.py"
    assert short_path("/srv/models/layers.py", ref) == "/srv/models/layers.py"
    # torch's own frames and the reference's are not a library's
    torch_file = str(Path(torch.__file__).parent / "nn" / "functional.py")
    assert library_frame([(ref, 9), (torch_file, 200)], ref) is None
    assert library_frame([(ref, 9), (site, 573), (torch_file, 200)], ref) == (
        "transformers/models/gpt2/modeling_gpt2.py:573"
    )


GPT2 = Path(__file__).resolve().parents[2] / "benchmarks" / "real_models" / "hf_gpt2.py"


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
def test_a_transformers_model_is_refused_naming_its_transformers_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The suite's GPT-2 (a KernelBench file around GPT2LMHeadModel), at its tiny config.
    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "float32")
    lines = GPT2.read_text().splitlines()
    call = next(i for i, ln in enumerate(lines, 1) if "return self.net(" in ln)
    cand = generate(GPT2, GPT2.name)
    assert not cand.handled and cand.reason is not None
    # whichever op it refuses, the refusal says where in transformers and where in the reference
    assert "(at transformers/models/gpt2/modeling_gpt2.py:" in cand.reason, cand.reason
    assert f", called from line {call})" in cand.reason, cand.reason
