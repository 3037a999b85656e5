"""The Verifier's worker (`stitch_lsp.verify.worker.main`, started by `stitch_lsp.workers.launch`).

It runs in its own process (a fresh CUDA context per candidate) and writes its result to a
file after every phase, so that when the candidate kills the process (a fault, os._exit, a
hang the parent times out) the parent still knows how far it got. stdout belongs to the
candidate; nothing is read from it.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import (
    VerifyRequest,
    VerifyResult,
    VerifyStatus,
)
from stitch_lsp.runtime.fastcuda import CudaBuildError, detect_arch
from stitch_lsp.verify.literals import module_literals
from stitch_lsp.verify.source_map import definition_line
from stitch_lsp.verify.worker.loading import (
    BuildFailure,
    BuildWatch,
    fastcuda_failure,
    import_file,
    static_fastcuda_builds,
    static_inline_builds,
    torch_arch_list,
    watch_torch_builds,
)
from stitch_lsp.workers.entry import read_request


class Worker:
    def __init__(self, request: VerifyRequest, result_path: Path) -> None:
        self.req = request
        self.result_path = result_path
        self.start = time.perf_counter()
        self.result = VerifyResult(
            status=VerifyStatus.runtime_error,
            message="the worker stopped before it finished",
            reference=request.reference,
            candidate=request.candidate,
            device=request.device,
        )
        self.candidate_path = Path(request.candidate).resolve()
        self.reference_path = Path(request.reference).resolve()
        self.watch = BuildWatch(self.candidate_path, compile_only=request.compile_only)
        self.skipped: list[Finding] = []  # static builds left out: their arguments need code
        # The harness's functions before any reference or candidate code ran (harness.py).
        self.harness: dict[str, Any] = {}
        self._phase_start = time.perf_counter()

    # ------------------------------------------------------------------ bookkeeping

    def phase(self, name: str) -> None:
        now = time.perf_counter()
        prev = self.result.phase
        self.result.phase_seconds[prev] = round(
            self.result.phase_seconds.get(prev, 0.0) + now - self._phase_start, 4
        )
        self._phase_start = now
        self.result.phase = name
        self.save()

    def save(self) -> None:
        self.result.wall_seconds = time.perf_counter() - self.start
        tmp = self.result_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(self.result.model_dump_json())
        os.replace(tmp, self.result_path)

    def finish(self, status: VerifyStatus, message: str = "") -> None:
        self.result.status = status
        self.result.message = message
        if self.result.build is None or self.result.build.kind == "none":
            self.result.build = self.watch.summary()
        self.phase("done")

    def candidate_finding(
        self, code: str, message: str, *, severity: Severity = Severity.error
    ) -> Finding:
        text = _read(self.candidate_path)
        line = definition_line(text, "ModelNew")
        return Finding(
            path=str(self.candidate_path),
            line=line,
            severity=severity,
            code=code,
            message=message,
            source="stitch-verify",
        )

    # ------------------------------------------------------------------ run

    def run(self) -> None:
        try:
            self._run()
        except CudaBuildError as exc:
            self._build_failed(fastcuda_failure(exc, self.candidate_path))
        except BuildFailure as exc:
            self._build_failed(exc)
        except Exception as exc:
            self._runtime_error(exc)

    def _build_failed(self, failure: BuildFailure) -> None:
        self.result.diagnostics.extend(failure.findings)
        self.result.build = failure.info
        first = next((f for f in failure.findings if f.severity is Severity.error), None)
        where = f"{Path(first.path).name}:{first.line}: {first.message}" if first else str(failure)
        self.finish(VerifyStatus.compile_error, f"build failed: {where}"[:1000])

    def _runtime_error(self, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(exc))
        name = type(exc).__name__
        short = f"{name}: {exc}".strip()
        if "out of memory" in short.lower():
            short = f"out of memory: {exc}"
        self.result.log_tail = text[-4000:]
        self.result.diagnostics.append(
            self.candidate_finding("stitch.runtime-error", f"{self.result.phase}: {short[:500]}")
        )
        self.finish(VerifyStatus.runtime_error, short[:1000])

    def _run(self) -> None:
        self.phase("import")
        torch: Any
        try:
            import torch
        except ImportError:
            torch = None
        gpu = torch is not None and torch.cuda.is_available() and not self.req.compile_only
        if not gpu:
            self._compile_only(torch is not None)
            return
        from stitch_lsp.verify.worker import harness
        from stitch_lsp.verify.worker.gpu import GpuRun

        self.harness = harness.snapshot()
        device = torch.device(self.req.device or "cuda:0")
        torch.cuda.set_device(device)
        self.result.gpu_name = torch.cuda.get_device_name(device)
        if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
            os.environ["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(detect_arch())
        self.phase("build")
        ref_mod = None
        if self.reference_path != self.candidate_path:
            ref_mod = import_file(self.reference_path, "stitch_verify_reference")
        # Builds may happen at import, in __init__ or on the first forward: watch them all.
        with watch_torch_builds(self.watch):
            cand_mod = self._import_candidate()
            GpuRun(self, torch, device, ref_mod or cand_mod, cand_mod).run()

    def _import_candidate(self) -> Any:
        same = self.reference_path == self.candidate_path
        return import_file(
            self.candidate_path, "stitch_verify_pair" if same else "stitch_verify_candidate"
        )

    def _compile_only(self, have_torch: bool) -> None:
        self.watch.compile_only = True
        if have_torch:
            self.phase("build")
            if self.reference_path != self.candidate_path:
                import_file(self.reference_path, "stitch_verify_reference")
            with watch_torch_builds(self.watch):
                cand = self._import_candidate()
                static_inline_builds(cand, self.candidate_path, self.watch, self.skipped)
            static_fastcuda_builds(vars(cand), self.candidate_path, self.skipped)
        else:
            self.phase("build")
            self._build_without_torch()
        self.result.diagnostics.extend(self.skipped)
        self.result.build = self.watch.summary()
        why = (
            "compile-only run requested"
            if self.req.compile_only
            else "no CUDA GPU visible to torch"
            if have_torch
            else "torch is not installed for the worker's Python"
        )
        built = "built" if self.result.build.kind != "none" else "nothing to build"
        self.finish(VerifyStatus.no_gpu, f"{why}: {built}; correctness and timing need a GPU")

    def _build_without_torch(self) -> None:
        """No torch at all: build the candidate's fastcuda sources found in its text.

        Only module-level literals are read (`SRC = HEADER + BODY`); none of the file runs."""
        import ast

        try:
            tree = ast.parse(_read(self.candidate_path))
        except (SyntaxError, ValueError):
            return
        static_fastcuda_builds(module_literals(tree), self.candidate_path, self.skipped)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    request, out = read_request(args, VerifyRequest, "stitch_lsp.verify.worker.main")
    worker = Worker(request, out.path)
    worker.save()
    worker.run()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's broken CUDA context can hang in destructors.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
