"""The runner's flow without a GPU: stand-in `ncu`/`nvidia-smi` executables on PATH.

The stand-in ncu records its argument list and writes a real report (the shared fixture), so
these tests check the command line we build (ncu flags, kernel filter, sections), the nvcc
build, the report reading and the error messages, on any machine with nvcc.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from stitch_lsp.models.profile import ProfileErrorKind, ProfileRequest
from stitch_lsp.profile.worker.measure import (
    NCU_PERMISSION_HELP,
    classify_failure,
    kernel_filter,
    kernel_names,
    run_profile,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

REPO = Path(__file__).resolve().parents[2]
FAKE_NCU = """#!{python}
import json, shutil, sys
args = sys.argv[1:]
open({argv_file!r}, "w").write(json.dumps(args))
mode = {mode!r}
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access counters")
    sys.exit(1)
if mode == "none":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
out = args[args.index("--export") + 1]
shutil.copy({report!r}, out + ".ncu-rep")
"""
FAKE_SMI = """#!/bin/sh
case "$*" in
  *compute_cap*) echo "9.0" ;;
  *) echo "GPU 0: NVIDIA H200 (UUID: GPU-test)" ;;
esac
"""


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_tools(tmp_path: Path, ncu_fixture_dir: Path, monkeypatch: pytest.MonkeyPatch):
    import sys

    def make(mode: str = "ok") -> Path:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        argv_file = tmp_path / "ncu-argv.json"
        _exe(
            bin_dir / "ncu",
            FAKE_NCU.format(
                python=sys.executable,
                argv_file=str(argv_file),
                mode=mode,
                report=str(ncu_fixture_dir / "relu_bias_full.ncu-rep"),
            ),
        )
        _exe(bin_dir / "nvidia-smi", FAKE_SMI)
        monkeypatch.setenv(
            "PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        )
        return argv_file

    return make


def test_kernel_names_and_filter() -> None:
    src = (REPO / "examples/kernels/profile_inline_transpose.py").read_text()
    assert kernel_names(src) == ["transpose_inline"]
    text = (
        "__global__ void __launch_bounds__(256) a(int*x){}\n__global__ static void b_2 (float* y){}"
    )
    assert kernel_names(text) == ["a", "b_2"]
    assert kernel_filter(["a", "b_2"]) == "regex:^(a|b_2)$"
    assert kernel_filter([]) is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_cu_file_is_built_with_lineinfo_and_profiled(fake_tools, tmp_path: Path) -> None:
    argv_file = fake_tools()
    src = REPO / "examples/kernels/profile_uncoalesced.cu"
    req = ProfileRequest(
        path=str(src),
        sections=["SpeedOfLight", "SourceCounters"],
        launch_count=1,
        report_dir=str(tmp_path / "rep"),
    )
    run = run_profile(req)
    assert run.ok, (run.error, run.log_tail)
    args = json.loads(argv_file.read_text())
    assert args[:4] == ["--clock-control", "none", "--import-source", "yes"]
    assert args[args.index("--kernel-name") + 1] == "regex:^(transpose_naive)$"
    assert args[args.index("--launch-count") + 1] == "1"
    sections = [args[i + 1] for i, a in enumerate(args) if a == "--section"]
    assert sections == ["SpeedOfLight", "SourceCounters"]
    assert "--set" not in args and "--profile-from-start" not in args
    assert args[-1] == str(tmp_path / "rep" / "profile_uncoalesced")  # the built binary
    assert run.build_s > 0 and run.report is not None
    assert [k.name for k in run.report.kernels] == ["relu_bias"]  # what the stand-in wrote


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_full_set_replaces_sections(fake_tools, tmp_path: Path) -> None:
    argv_file = fake_tools()
    src = REPO / "examples/kernels/profile_register_limited.cu"
    run = run_profile(ProfileRequest(path=str(src), sections=["SpeedOfLight"], full_set=True,
                                     report_dir=str(tmp_path)))  # fmt: skip
    assert run.ok
    args = json.loads(argv_file.read_text())
    assert args[args.index("--set") + 1] == "full" and "--section" not in args


def test_permission_error_says_how_to_fix(fake_tools, tmp_path: Path) -> None:
    fake_tools("perm")
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[0] = 1.f; }\nint main() { k<<<1, 1>>>(0); }\n")
    run = run_profile(ProfileRequest(path=str(src), report_dir=str(tmp_path / "r")))
    if run.error_kind is ProfileErrorKind.build_failed:
        pytest.skip("nvcc could not build the probe here")
    assert run.error_kind is ProfileErrorKind.no_permission
    assert "NVreg_RestrictProfilingToAdminUsers=0" in (run.error or "")
    assert "CAP_SYS_ADMIN" in (run.error or "") and "root" in (run.error or "")


def test_no_ncu_and_no_gpu_are_plain_messages(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    src = tmp_path / "k.cu"
    src.write_text("int main() { return 0; }\n")
    run = run_profile(ProfileRequest(path=str(src), ncu_path="ncu"))
    assert run.error_kind is ProfileErrorKind.no_ncu and "not found" in (run.error or "")
    _exe(tmp_path / "ncu", "#!/bin/sh\nexit 0\n")
    run = run_profile(ProfileRequest(path=str(src), ncu_path="ncu"))
    assert run.error_kind is ProfileErrorKind.no_gpu and "nvidia-smi" in (run.error or "")


def test_classify_failure() -> None:
    assert classify_failure("==ERROR== ERR_NVGPUCTRPERM", 1) == (
        ProfileErrorKind.no_permission,
        NCU_PERMISSION_HELP,
    )
    assert (
        classify_failure("==WARNING== No kernels were profiled.", 0)[0]
        is ProfileErrorKind.no_kernels
    )
    assert classify_failure("Segmentation fault", 139)[0] is ProfileErrorKind.target_failed


def test_target_says_when_torch_sees_no_gpu(tmp_path: Path) -> None:
    """The profiled program's own check, where torch has no CUDA (CPU wheels, no driver)."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    from tests.conftest import gpu_reason

    if gpu_reason() is None:
        pytest.skip("a GPU is visible here")
    model = tmp_path / "m.py"
    model.write_text("class ModelNew: pass\ndef get_inputs(): return []\n")
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp.profile.worker.target", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 3 and "no CUDA GPU" in out.stderr
