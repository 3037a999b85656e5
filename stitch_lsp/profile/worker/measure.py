"""Run a file under Nsight Compute and read the report: the body of the profile worker.

No torch here: for a `.py` file ncu runs the `profile.worker.target` worker (which imports
torch in its own process); for a `.cu` file with `main` we build it with `nvcc -lineinfo` and
profile the binary. Every failure becomes a `ProfileRun` with a kind and a message that says
what to do, never an exception.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from stitch_lsp.gpus import build_arch, inventory
from stitch_lsp.models.profile import ProfileErrorKind, ProfileRequest, ProfileRun
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import worker_command, worker_environment

NCU_PERMISSION_HELP = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM). Either run the profile "
    "as root (or with CAP_SYS_ADMIN), or allow all users: add "
    "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` to a file in /etc/modprobe.d/, "
    "rebuild the initramfs if the driver loads from it, and reboot. See "
    "https://developer.nvidia.com/nvidia-development-tools-solutions-err_nvgpuctrperm-permission-issue-performance-counters"
)
_GLOBAL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\("
)
_NCU_LOCATIONS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute")


def find_ncu(configured: str = "ncu") -> str | None:
    """The ncu executable: the configured one, else PATH, else the usual install folders."""
    found = shutil.which(configured)
    if found:
        return found
    for place in _NCU_LOCATIONS:
        p = Path(place)
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        if p.is_dir():
            candidates = sorted(p.glob("*/ncu"), reverse=True)
            if candidates:
                return str(candidates[0])
    return None


def gpu_problem() -> str | None:
    """Why there is no usable NVIDIA GPU here (nothing can be profiled), or None."""
    return inventory().problem


def kernel_names(source: str) -> list[str]:
    """Names of the `__global__` functions in a file (CUDA, or CUDA in Python strings)."""
    names: list[str] = []
    for name in _GLOBAL.findall(source):
        if name not in names:
            names.append(name)
    return names


def kernel_filter(names: list[str]) -> str | None:
    return f"regex:^({'|'.join(re.escape(n) for n in names)})$" if names else None


def _section_flags(sections: list[str]) -> list[str]:
    flags: list[str] = []
    for s in sections:
        flags += ["--section", s]
    return flags


def build_command(
    req: ProfileRequest,
    ncu: str,
    report_base: Path,
    target: list[str],
    kernel_regex: str | None,
    from_start: bool,
) -> list[str]:
    cmd = [
        ncu,
        "--clock-control", "none",
        "--import-source", "yes",
        "--target-processes", "all",
        "--force-overwrite",
        "--export", str(report_base),
        "--launch-count", str(req.launch_count),
    ]  # fmt: skip
    if kernel_regex:
        cmd += ["--kernel-name", kernel_regex]
    cmd += ["--set", "full"] if req.full_set else _section_flags(req.sections)
    if not from_start:
        cmd += ["--profile-from-start", "off"]
    return cmd + target


def classify_failure(output: str, returncode: int) -> tuple[ProfileErrorKind, str]:
    if "ERR_NVGPUCTRPERM" in output:
        return ProfileErrorKind.no_permission, NCU_PERMISSION_HELP
    if "No kernels were profiled" in output:
        return ProfileErrorKind.no_kernels, (
            "ncu profiled no kernels: the filter matched no launch in the profiled range "
            "(is the kernel name right, and does forward() launch it?)"
        )
    if re.search(r"no CUDA-capable device|CUDA driver version is insufficient", output):
        return ProfileErrorKind.no_gpu, "the target found no usable CUDA device"
    return ProfileErrorKind.target_failed, f"the profiled program failed (exit code {returncode})"


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def _worker_env() -> dict[str, str]:
    """The target's environment: the workers' one, with nvcc adding line info.

    nvcc appends NVCC_APPEND_FLAGS to every compile, so an extension that the file builds with
    load_inline gets `-lineinfo` even when its own flags lack it; without line info the report
    has no source lines to put findings on. (torch's extension cache does not see this flag: an
    extension built earlier without it is reused as it is.)
    """
    flags = os.environ.get("NVCC_APPEND_FLAGS", "")
    if "-lineinfo" not in flags:
        flags = (flags + " -lineinfo").strip()
    return worker_environment({"NVCC_APPEND_FLAGS": flags})


ALL_KERNELS = "regex:."


def run_profile(req: ProfileRequest) -> ProfileRun:
    """Profile `req.path` (and then its reference, if named) and read the reports.

    Never raises for an expected failure. A reference that cannot be profiled leaves the
    candidate's report as it is and says why in `reference_error`.
    """
    run = _run_one(req)
    if not run.ok or not req.reference:
        return run
    ref_req = req.model_copy(
        update={
            "path": req.reference,
            "reference": None,
            "class_name": "Model",
            "kernel_regex": ALL_KERNELS,  # PyTorch's kernels: the reference has none of its own
            "report_dir": str(Path(run.report_path).parent / "reference")
            if run.report_path
            else None,
        }
    )
    ref = _run_one(ref_req)
    if ref.ok and ref.report is not None:
        run.reference_report = ref.report
    else:
        run.reference_error = ref.error or "the reference could not be profiled"
    run.wall_s += ref.wall_s
    run.ncu_s += ref.ncu_s
    return run


def _run_one(req: ProfileRequest) -> ProfileRun:
    started = time.perf_counter()
    path = Path(req.path).resolve()

    def fail(kind: ProfileErrorKind, message: str, **extra: object) -> ProfileRun:
        return ProfileRun(
            ok=False,
            error_kind=kind,
            error=message,
            wall_s=time.perf_counter() - started,
            **extra,
        )

    if not path.is_file():
        return fail(ProfileErrorKind.failed, f"no such file: {path}")
    ncu = find_ncu(req.ncu_path)
    if ncu is None:
        return fail(
            ProfileErrorKind.no_ncu,
            f"Nsight Compute (`{req.ncu_path}`) was not found on PATH; install it with the CUDA "
            "toolkit or set stitch.ncuPath",
        )
    problem = gpu_problem()
    if problem:
        return fail(ProfileErrorKind.no_gpu, problem)

    text = path.read_text(encoding="utf-8", errors="replace")
    own = kernel_names(text)
    kernel_regex = req.kernel_regex or kernel_filter(own)
    report_dir = Path(req.report_dir) if req.report_dir else Path(tempfile.mkdtemp(prefix="ncu-"))
    report_dir.mkdir(parents=True, exist_ok=True)
    report_base = report_dir / path.stem
    build_s = 0.0

    if path.suffix in (".cu",):
        if not re.search(r"\bmain\s*\(", text):
            return fail(
                ProfileErrorKind.failed,
                f"{path.name} has no main(); profile the Python file that launches its kernels, "
                "or load an existing report with `stitch-lsp hints`",
            )
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            return fail(ProfileErrorKind.build_failed, "nvcc was not found on PATH")
        binary = report_dir / path.stem
        arch = build_arch()
        build = [nvcc, "-O3", "-lineinfo", f"-arch={arch}", *req.nvcc_flags, "-o", str(binary),
                 str(path)]  # fmt: skip
        t = time.perf_counter()
        try:
            out = subprocess.run(
                build, capture_output=True, text=True, check=False, timeout=req.timeout_s
            )
        except subprocess.TimeoutExpired:
            return fail(ProfileErrorKind.timeout, f"nvcc took over {req.timeout_s:.0f} s")
        build_s = time.perf_counter() - t
        if out.returncode != 0:
            return fail(
                ProfileErrorKind.build_failed,
                f"nvcc failed on {path.name}",
                command=build,
                log_tail=_tail(out.stdout + out.stderr),
                build_s=build_s,
            )
        target, from_start = [str(binary)], True
    elif path.suffix == ".py":
        args = [str(path), *(["--class", req.class_name] if req.class_name else [])]
        # Isolated like every worker: the file's folder is never on its import path.
        target = worker_command(req.python, WORKER_ENTRY_POINTS["profile-target"], args)
        from_start = False
        # Import once outside ncu: load_inline builds (tens of seconds) then run at full speed,
        # and a build error is reported as one, not as a profiling failure.
        t = time.perf_counter()
        try:
            out = subprocess.run(
                [*target, "--prepare"],
                capture_output=True,
                text=True,
                timeout=req.timeout_s,
                check=False,
                cwd=str(path.parent),
                env=_worker_env(),
            )
        except subprocess.TimeoutExpired:
            return fail(
                ProfileErrorKind.timeout, f"importing {path.name} took over {req.timeout_s:.0f} s"
            )
        build_s = time.perf_counter() - t
        if out.returncode != 0:
            log = out.stdout + out.stderr
            kind = ProfileErrorKind.no_gpu if out.returncode == 3 else ProfileErrorKind.build_failed
            last = next((ln for ln in reversed(log.strip().splitlines()) if ln.strip()), "")
            return fail(kind, f"importing {path.name} failed before profiling (exit code "
                        f"{out.returncode}): {last[-300:]}", command=[*target, "--prepare"],
                        log_tail=_tail(log), build_s=build_s)  # fmt: skip
    else:
        return fail(
            ProfileErrorKind.failed, f"cannot profile a {path.suffix} file: give a .py or .cu"
        )

    cmd = build_command(req, ncu, report_base, target, kernel_regex, from_start)
    env = _worker_env()
    t = time.perf_counter()
    try:
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=req.timeout_s,
            check=False,
            cwd=str(path.parent),
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        return fail(
            ProfileErrorKind.timeout,
            f"ncu did not finish in {req.timeout_s:.0f} s",
            command=cmd,
            log_tail=_tail(str(exc.stdout or "") + str(exc.stderr or "")),
        )
    ncu_s = time.perf_counter() - t
    log = out.stdout + out.stderr
    report_path = report_base.parent / (report_base.name + ".ncu-rep")
    if out.returncode != 0 or not report_path.is_file():
        kind, message = classify_failure(log, out.returncode)
        return fail(kind, message, command=cmd, log_tail=_tail(log), ncu_s=ncu_s, build_s=build_s)

    from stitch_lsp.profile.worker.report import ReportError, load_report

    try:
        report = load_report(report_path, ncu)
    except ReportError as exc:
        kind, message = ProfileErrorKind.failed, str(exc)
        if "no profiled kernels" in message:
            kind, message = classify_failure("No kernels were profiled", 0)
        return fail(kind, message, command=cmd, log_tail=_tail(log))
    if not report.kernels:
        kind, message = classify_failure("No kernels were profiled", 0)
        return fail(kind, message, command=cmd, log_tail=_tail(log))
    return ProfileRun(
        ok=True,
        report_path=str(report_path),
        report=report,
        command=cmd,
        wall_s=time.perf_counter() - started,
        ncu_s=ncu_s,
        build_s=build_s,
        log_tail=_tail(log, 2000),
    )
