"""Do KernelBench's harness and our Verifier agree on standalone copies? (needs a CUDA GPU)

For each KernelBench problem given:
1. the builtin coder writes a standalone copy (`stitch-lsp generate --standalone`, compile-only:
   the copy builds with `torch.utils.cpp_extension.load_inline` and imports no stitch_lsp);
2. KernelBench's own `eval_kernel_against_ref` (vendored, pinned: benchmarks/kernelbench/) checks
   it: 5 correctness trials, then timing with CUDA events against the reference;
3. our Verifier (`stitch-lsp verify --json`) checks the same file.
Every step runs in its own process (a fresh CUDA context), and all share one
TORCH_EXTENSIONS_DIR, so each copy is built once (45-60 s on an H200 machine) and then reused.

    python3 benchmarks/kernelbench_agreement.py PROBLEM.py ... --out DIR

prints one line per problem and writes DIR/agreement.json and DIR/agreement.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENDORED = REPO / "benchmarks" / "kernelbench"
SPEEDUP_TOLERANCE = 0.10  # relative: the two harnesses time differently (see agreement.md)


def kernelbench_one(ref: Path, cand: Path, build_dir: str, trials: int, perf_trials: int) -> None:
    """In a child process: KernelBench's verdict as one JSON line on stdout."""
    sys.path.insert(0, str(VENDORED))
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    started = time.perf_counter()
    result = eval_kernel_against_ref(
        ref.read_text(),
        cand.read_text(),
        seed_num=42,
        num_correct_trials=trials,
        num_perf_trials=perf_trials,
        measure_performance=True,
        timing_method="cuda_event",
        build_dir=build_dir,
        device=torch.device("cuda:0"),
        precision=torch.float32,
        check_for_excessive_speedup=True,  # it also times the reference: the speedup's base
    )
    out: dict[str, Any] = {"seconds": time.perf_counter() - started}
    if result is None:
        out["error"] = "KernelBench asked for a retry (a build lock)"
    else:
        out.update(
            compiled=result.compiled,
            correct=result.correctness,
            runtime_ms=result.runtime,
            ref_runtime_ms=result.ref_runtime,
            metadata={k: str(v)[:300] for k, v in result.metadata.items()},
        )
        if result.correctness and result.runtime > 0 and result.ref_runtime > 0:
            out["speedup"] = result.ref_runtime / result.runtime
    print("KB_RESULT " + json.dumps(out), flush=True)


def run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO
    )


def one_problem(ref: Path, out: Path, env: dict[str, str], args: argparse.Namespace) -> dict:
    row: dict[str, Any] = {"problem": f"{ref.parent.name}/{ref.stem}"}
    cand = out / f"{ref.stem}_standalone.py"
    t0 = time.perf_counter()
    gen = run(
        [sys.executable, "-m", "stitch_lsp", "generate", str(ref), "--coder", "builtin",
         "--verify", "compile", "--standalone", "-o", str(cand)],
        env, 900,
    )  # fmt: skip
    row["generate_s"] = round(time.perf_counter() - t0, 1)
    if gen.returncode != 0 or not cand.is_file():
        row["error"] = "generate failed: " + gen.stderr.strip()[-400:]
        return row
    t0 = time.perf_counter()
    kb = run(
        [sys.executable, __file__, "--kb-one", str(ref), str(cand), "--build-dir",
         env["TORCH_EXTENSIONS_DIR"], "--trials", str(args.trials),
         "--perf-trials", str(args.perf_trials)],
        env, 1200,
    )  # fmt: skip
    row["kernelbench_s"] = round(time.perf_counter() - t0, 1)
    line = next((x for x in kb.stdout.splitlines() if x.startswith("KB_RESULT ")), None)
    row["kernelbench"] = (
        json.loads(line.removeprefix("KB_RESULT "))
        if line
        else {"error": (kb.stderr or kb.stdout).strip()[-600:]}
    )
    t0 = time.perf_counter()
    ours = run(
        [sys.executable, "-m", "stitch_lsp", "verify", str(ref), str(cand), "--json",
         "--trials", str(args.trials), "--no-compile"],
        env, 1200,
    )  # fmt: skip
    row["verifier_s"] = round(time.perf_counter() - t0, 1)
    try:
        v = json.loads(ours.stdout)
        timing = v.get("timing") or {}
        row["verifier"] = {
            "status": v.get("status"),
            "message": v.get("message", "")[:300],
            "speedup_vs_eager": v.get("speedup_vs_eager"),
            "speedup_vs_compile": v.get("speedup_vs_compile"),
            "candidate_ms": (timing.get("candidate") or {}).get("mean"),
            "eager_ms": (timing.get("eager") or {}).get("mean"),
            "build": (v.get("build") or {}).get("kind"),
            "build_s": (v.get("build") or {}).get("seconds"),
        }
    except ValueError:
        row["verifier"] = {"error": (ours.stderr or ours.stdout).strip()[-600:]}
    kb_ok = row["kernelbench"].get("correct")
    our_ok = row["verifier"].get("status") == "passed"
    row["verdicts_agree"] = kb_ok is not None and bool(kb_ok) == our_ok
    a, b = row["kernelbench"].get("speedup"), row["verifier"].get("speedup_vs_eager")
    if a and b:
        row["speedup_ratio"] = round(b / a, 3)
        row["speedups_agree"] = abs(b / a - 1) <= SPEEDUP_TOLERANCE
    return row


def _cell(value: object) -> str:
    """One table cell: the last line of a message, without pipes."""
    text = str(value).strip().splitlines()[-1] if str(value).strip() else ""
    return text.replace("|", "/")[:120]


def markdown(rows: list[dict]) -> str:
    lines = [
        "| problem | KernelBench: correct, speedup | Verifier: status, speedup vs eager | "
        "verdicts agree | speedup ratio (ours / KB) | build |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        kb, v = r.get("kernelbench", {}), r.get("verifier", {})
        kb_s = f"{kb['speedup']:.3f}x" if kb.get("speedup") else "-"
        v_s = f"{v['speedup_vs_eager']:.3f}x" if v.get("speedup_vs_eager") else "-"
        lines.append(
            f"| {r['problem']} | {_cell(kb.get('correct', kb.get('error', r.get('error'))))}, "
            f"{kb_s} | {_cell(v.get('status', v.get('error')))}, {v_s} | "
            f"{r.get('verdicts_agree', '-')} | {r.get('speedup_ratio', '-')} | "
            f"{v.get('build', '-')} {v.get('build_s') or 0:.0f} s |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=Path("/tmp/kb-agreement"))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--kb-one", nargs=2, type=Path, metavar=("REF", "CAND"))
    parser.add_argument("--build-dir", default=None)
    args = parser.parse_args()
    if args.kb_one:
        ref, cand = args.kb_one
        kernelbench_one(ref, cand, args.build_dir, args.trials, args.perf_trials)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("TORCH_EXTENSIONS_DIR", str(args.out / "torch-extensions"))
    rows = []
    for ref in args.problems:
        row = one_problem(ref.resolve(), args.out, env, args)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / "agreement.json").write_text(json.dumps(rows, indent=1))
    table = markdown(rows)
    (args.out / "agreement.md").write_text(table)
    print(table)
    return 0 if rows and all(r.get("verdicts_agree") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
