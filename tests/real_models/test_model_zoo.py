"""benchmarks/model_zoo.py writes problems in the Verifier's format, one per zoo entry, none of
them a model the suite already holds. Building the models is the benchmark's job (minutes); here,
the files: they parse, define what the Verifier imports, and find the suite's `_common.py`."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "benchmarks" / "model_zoo.py"
SETS = ("first", "more", "third")


def _zoo() -> object:
    spec = importlib.util.spec_from_file_location("model_zoo_under_test", ZOO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("which", SETS)
def test_every_zoo_problem_is_a_verifier_problem(which: str) -> None:
    zoo = _zoo()
    made: dict[str, str] = zoo.problems(which)  # type: ignore[attr-defined]
    assert len(made) == {"first": 87, "more": 65, "third": 75}[which]
    for name, source in made.items():
        tree = ast.parse(source, filename=name)
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= defined, name
    assert Path(zoo.COMMON).is_file()  # type: ignore[attr-defined]


def test_the_zoo_holds_no_model_of_the_suite() -> None:
    """Suite and zoo name their files alike (`tv_resnet50`, `timm_resnet50d`, `hf_llama`); no
    two sets share a model either."""
    suite = {p.stem for p in (REPO / "benchmarks" / "real_models").glob("[a-z]*.py")}
    problems = _zoo().problems  # type: ignore[attr-defined]
    sets = [{Path(name).stem for name in problems(which)} for which in SETS]
    zoo = set().union(*sets)
    assert len(suite) >= 25 and len(zoo) == sum(map(len, sets)) == 227
    assert not suite & zoo


def test_the_script_writes_the_files(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ZOO), str(tmp_path / "zoo")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    written = sorted(p.name for p in (tmp_path / "zoo").glob("*.py"))
    assert f"wrote {len(written)} problems" in out.stdout
    assert "hf_falcon.py" in written and "tv_swin_v2_t.py" in written
    assert "hf_wav2vec2.py" in written and "hf_whisper_encoder.py" in written
