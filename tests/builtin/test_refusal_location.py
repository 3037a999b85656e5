"""A refusal, or a PyTorch fallback, names the library line that runs the op, besides the
reference line.

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


def noisy(x):
    y = x * 2
    return torch.bernoulli(torch.sigmoid(y))


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


def fallbacks(folder: Path, body: str) -> list[str]:
    """The docstring's lines on the PyTorch fallbacks of a handled reference."""
    path = folder / "ref.py"
    path.write_text(reference(body))
    cand = generate(path, path.name)
    assert cand.handled, cand.reason
    return [ln.strip() for ln in cand.source.splitlines() if ln.strip().startswith("torch.ops.")]


def test_an_op_in_a_library_names_the_library_line_and_the_reference_line(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            x = x + 1
            return x * scan_lib.noisy(x)
        """,
    )
    assert reason.startswith("bernoulli (at scan_lib.py:11, called from line 10): random"), reason


def test_an_op_in_the_reference_itself_is_refused_as_before(folder: Path) -> None:
    reason = refusal(
        folder,
        """
        def forward(self, x):
            x = scan_lib.double(x)
            return x * torch.bernoulli(torch.sigmoid(x))
        """,
    )
    assert reason.startswith("bernoulli (line 10): random numbers"), reason


def test_a_fallback_in_a_library_names_the_library_line(folder: Path) -> None:
    lines = fallbacks(
        folder,
        """
        def forward(self, x):
            x = x + 1
            return scan_lib.scan(x) * 3
        """,
    )
    assert lines == [
        "torch.ops.aten.cumprod.default: torch.cumprod (at scan_lib.py:6, called from line "
        "10); no lowering in the op catalogue"
    ]


def test_a_fallback_the_builder_refused_names_the_library_line_and_why(folder: Path) -> None:
    lines = fallbacks(
        folder,
        """
        def forward(self, x):
            return scan_lib.rolled(x) + 1
        """,
    )
    (line,) = lines
    assert line.startswith(
        "torch.ops.aten.roll.default: torch.roll (at scan_lib.py:15, called from line 9); "
    ), line
    assert "roll without dims" in line, line


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
    assert reason.endswith(" (at scan_lib.py:19, called from line 10)"), reason


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
        "(at scan_lib.py:27, called from line 10)"
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
def test_a_transformers_models_fallbacks_name_their_transformers_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The suite's GPT-2 (a KernelBench file around GPT2LMHeadModel), at its tiny config: its
    # position ids and masks are integer work that stays in PyTorch, each named where it runs.
    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "float32")
    lines = GPT2.read_text().splitlines()
    call = next(i for i, ln in enumerate(lines, 1) if "return self.net(" in ln)
    cand = generate(GPT2, GPT2.name)
    assert cand.handled, cand.reason
    named = [ln for ln in cand.source.splitlines() if ln.strip().startswith("torch.ops.aten.")]
    assert named
    for ln in named:
        assert "(at transformers/" in ln and f", called from line {call})" in ln, ln
    assert any("torch.arange (at transformers/models/gpt2/modeling_gpt2.py:" in ln for ln in named)


def test_a_half_precision_model_is_refused_for_what_the_aten_capture_found(folder: Path) -> None:
    """The fx converter takes float32 only; for a bf16 model its refusal ("is bfloat16") would
    hide the ATen capture's, which names the library line."""
    reason = refusal(
        folder,
        """
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, dtype=torch.bfloat16))

        def forward(self, x):
            return scan_lib.noisy(self.w * 2) + x[0, 0]
        """,
    )
    assert reason.startswith("torch.bernoulli (at scan_lib.py:11, called from line 13)"), reason
    assert "handles float32" not in reason
