"""The README's Quick start installs what its own examples need, and `.ci/run` agrees with it
(issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")


def quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [ln for ln in block.group(1).splitlines() if ln and not ln.startswith("#")]


def test_command_1_installs_cublas_headers_for_the_generated_gemms() -> None:
    first = quick_start()[0]
    install = first.split("&&")[1]
    assert "pip install -e '.[torch]'" in install and "nvidia-cublas" in install.split()
    assert "stitch-lsp generate examples/layernorm_gelu.py" in first
    assert (REPO / "examples" / "layernorm_gelu.py").is_file()
    # the default is auto: the command needs no flag to work without a GPU
    assert "--verify" not in first


def test_ci_runs_command_2_verbatim_and_installs_cublas_too() -> None:
    second = quick_start()[1]
    quiet = [ln.replace("pip install -q ", "pip install ") for ln in CI.splitlines()]
    assert second in quiet  # verbatim but for pip's -q
    assert re.search(r"pip install[^\n]* nvidia-cublas", CI)


def test_the_examples_readme_needs_nothing_the_quick_start_skips() -> None:
    examples = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    assert "pip install nvidia-cublas" in examples  # the one extra it names is installed above
