"""Snapshot what the builtin coder generates, to show a refactor left it unchanged (CPU).

For every problem file given (folders are searched for KernelBench-format files), the candidate
the builtin generator writes (or its refusal) through the default capture path, and through the
ATen path alone, goes into one JSON file. Two snapshots compare with `--compare`:

    python benchmarks/codegen_snapshot.py tests/data/kernelbench ../shared/kernelbench-dev \\
        --out after.json [--compare before.json]

Run it from a checkout of the older commit for the "before" side (the pre-move layout,
`stitch_lsp.agents.builtin`, is read too).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))


def _modules() -> dict[str, Any]:
    """The generator's pieces, in the current layout or the one before `stitch_lsp.compiler`."""
    layouts = {
        "compiler": {
            "generate": "stitch_lsp.compiler.worker.generate",
            "capture": "stitch_lsp.compiler.worker.capture",
            "aten": "stitch_lsp.compiler.worker.capture_aten",
            "partition": "stitch_lsp.compiler.partition",
            "codegen": "stitch_lsp.compiler.codegen",
            "program": "stitch_lsp.compiler.program",
            "ir": "stitch_lsp.compiler.ir",
        },
        "agents.builtin": {
            "generate": "stitch_lsp.agents.builtin.generate",
            "capture": "stitch_lsp.agents.builtin.capture",
            "aten": "stitch_lsp.agents.builtin.capture_aten",
            "partition": "stitch_lsp.agents.builtin.partition",
            "codegen": "stitch_lsp.agents.builtin.codegen",
            "program": "stitch_lsp.agents.builtin.pysource",
            "ir": "stitch_lsp.agents.builtin.ir",
        },
    }
    for names in layouts.values():
        try:
            return {k: importlib.import_module(v) for k, v in names.items()}
        except ImportError:
            continue
    raise SystemExit("no builtin generator found under stitch_lsp in this checkout")


def test_problems(folder: Path) -> list[Path]:
    """The builtin tests' problems (sources held in dicts), written out as files."""
    from tests.builtin.problems import PROBLEMS
    from tests.builtin.problems_l3 import EINOPS, L3

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, source in {**PROBLEMS, **L3, **EINOPS}.items():
        path = folder / f"{name}.py"
        path.write_text(source)
        written.append(path.resolve())
    return written


def problems(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            text = f.read_text(errors="ignore")
            if "class Model" in text and "def get_inputs" in text:
                found.append(f.resolve())
    return found


def snapshot(files: list[Path]) -> dict[str, dict[str, str]]:
    m = _modules()
    out: dict[str, dict[str, str]] = {}
    for path in files:
        r = m["generate"].generate(path, path.name)
        entry = {
            "default": r.source if r.handled else "REFUSED: " + (r.reason or ""),
            "summary": r.graph_summary or "",
        }
        try:
            model, inputs = m["capture"].build_on_meta(path)
            names = m["capture"].forward_names(model, len(inputs))
            graph = m["aten"].capture_aten(model, inputs, names, str(path))
            groups = m["partition"].fold_gemm_epilogues(graph, m["partition"].partition(graph))
            cg = m["codegen"].Codegen(graph, groups)
            cuda = cg.cuda_source()
            entry["aten"] = m["program"].candidate_source(
                graph, groups, cg, cuda, path.read_text(), path.name
            )
        except m["ir"].Unsupported as exc:
            entry["aten"] = "REFUSED: " + str(exc)
        except Exception as exc:  # a crash is a result too: it must not differ either
            entry["aten"] = f"ERROR: {type(exc).__name__}: {str(exc)[:300]}"
        out[path.name if path.parent.name == "" else f"{path.parent.name}/{path.name}"] = entry
    return out


def compare(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> int:
    diffs = 0
    for key in sorted(set(before) | set(after)):
        for field in ("default", "aten", "summary"):
            a, b = before.get(key, {}).get(field), after.get(key, {}).get(field)
            if a != b:
                diffs += 1
                print(f"DIFF {key} [{field}]")
                print(f"  before: {str(a)[:200]!r}\n  after:  {str(b)[:200]!r}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path, help="an earlier snapshot to compare with")
    ap.add_argument(
        "--test-problems", type=Path, help="also the builtin tests' problems, written here"
    )
    a = ap.parse_args()
    files = problems(a.paths)
    if a.test_problems:
        files += test_problems(a.test_problems)
    snap = snapshot(files)
    a.out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    handled = sum(not v["default"].startswith("REFUSED") for v in snap.values())
    aten = sum(not v["aten"].startswith(("REFUSED", "ERROR")) for v in snap.values())
    print(f"{len(snap)} problems: {handled} handled (default path), {aten} (ATen path alone)")
    if a.compare:
        diffs = compare(json.loads(a.compare.read_text()), snap)
        print(f"{diffs} differences against {a.compare}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
