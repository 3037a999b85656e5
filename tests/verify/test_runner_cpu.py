"""The Verifier's process boundary, without a GPU: crashes, hangs, the JSON contract, builds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stitch_lsp.config import Settings
from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.verify import verify
from stitch_lsp.verify.client import run_worker

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.fixture(autouse=True)
def _cpu_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests are about the no-GPU path, also on a machine that has one.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("STITCH_CACHE_DIR", str(tmp_path / "cache"))


def _settings() -> Settings:
    return Settings(verify_timeout_s=120)


def test_candidate_that_raises_is_a_runtime_error() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_raise.py", _settings())
    assert res.status is VerifyStatus.runtime_error
    assert "deliberate failure" in res.message
    assert "deliberate failure" in res.log_tail
    assert any(d.code == "stitch.runtime-error" for d in res.diagnostics)


def test_candidate_that_exits_is_a_runtime_error() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_exit.py", _settings())
    assert res.status is VerifyStatus.runtime_error
    assert "exited with code 7" in res.message


def test_candidate_that_hangs_times_out_and_its_children_die(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("STITCH_TEST_PID_FILE", str(pid_file))
    start = time.monotonic()
    # Unconfined, so the child can report its pid here; in the sandbox its PID namespace ends
    # with it (tests/security/test_sandbox.py).
    settings = Settings(verify_timeout_s=120, sandbox="none")
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_fork_sleep.py", settings, timeout_s=10)
    assert res.status is VerifyStatus.timeout
    assert time.monotonic() - start < 30
    assert "timed out after 10 s" in res.message
    child = int(pid_file.read_text())
    time.sleep(0.2)
    # The whole process group was killed, not just the worker (a zombie awaiting reaping by
    # init counts as dead).
    assert _dead(child)


def _dead(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status or "\nState:\tX" in status


def test_cancel_stops_the_worker() -> None:
    import threading

    cancel = threading.Event()
    threading.Timer(2.0, cancel.set).start()
    start = time.monotonic()
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_sleep.py", _settings(), cancel=cancel)
    assert res.status is VerifyStatus.runtime_error and res.message == "cancelled"
    assert time.monotonic() - start < 20


def test_worker_that_cannot_start() -> None:
    req = VerifyRequest(
        reference=str(DATA / "ref_bias_relu.py"), candidate=str(DATA / "cand_good.py")
    )
    res = run_worker(req, python="/nonexistent/python", env=dict(os.environ), timeout_s=5)
    assert res.status is VerifyStatus.runtime_error
    assert "cannot start the worker" in res.message


def test_missing_file() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "no_such_candidate.py", _settings())
    assert res.status is VerifyStatus.runtime_error and "no such file" in res.message


def test_static_error_ends_the_run_before_anything_executes() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_cache.py", _settings())
    assert res.status is VerifyStatus.exploit
    assert res.phase == "static"
    assert any(d.code == "stitch.input-cache" for d in res.diagnostics)


@needs_nvcc
def test_clean_candidate_builds_and_ends_as_no_gpu() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_good.py", _settings())
    assert res.status is VerifyStatus.no_gpu, res.message
    assert res.build and res.build.kind == "fastcuda" and res.build.compile_only
    assert "-lineinfo" in res.build.command
    assert "no CUDA GPU" in res.message


@needs_nvcc
def test_compile_error_maps_into_the_python_document() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_compile_error.py", _settings())
    assert res.status is VerifyStatus.compile_error
    (err,) = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    lines = (DATA / "cand_compile_error.py").read_text().splitlines()
    assert lines[err.line - 1].strip() == "undeclared_helper(i);"
    assert err.column == lines[err.line - 1].index("undeclared_helper") + 1
    assert err.path == str(DATA / "cand_compile_error.py")


@pytest.fixture(scope="module")
def torch_header_cache(run_tmp: Path) -> Path:
    """One cache for the tests that compile against torch's headers (tens of seconds each),
    whichever worker runs them."""
    cache = run_tmp / "torch-header-cache"
    cache.mkdir(exist_ok=True)
    return cache


@needs_nvcc
def test_load_inline_compile_only_error_maps_into_the_python_document(
    torch_header_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc -c against the CPU wheel's torch headers (with the cmake-macros shim)."""
    monkeypatch.setenv("STITCH_CACHE_DIR", str(torch_header_cache))
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_inline_error.py", _settings())
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-3000:])
    errs = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    lines = (DATA / "cand_inline_error.py").read_text().splitlines()
    assert errs and "missing_offset" in lines[errs[0].line - 1], errs
    assert res.build and res.build.kind == "load_inline" and res.build.compile_only


@needs_nvcc
def test_load_inline_in_init_is_found_and_compiled_without_a_gpu(
    torch_header_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call sits in ModelNew.__init__, which never runs without a GPU; its arguments are
    evaluated statically. Same CUDA text as the test above: the cached outcome is reused."""
    monkeypatch.setenv("STITCH_CACHE_DIR", str(torch_header_cache))
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_inline_lazy_error.py", _settings())
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-3000:])
    errs = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    lines = (DATA / "cand_inline_lazy_error.py").read_text().splitlines()
    assert errs and "missing_offset" in lines[errs[0].line - 1], errs


@needs_nvcc
def test_load_of_a_cu_file_reports_errors_in_that_file() -> None:
    res = verify(DATA / "ref_bias_relu.py", DATA / "cand_load_error.py", _settings())
    assert res.status is VerifyStatus.compile_error, (res.message, res.log_tail[-3000:])
    (err,) = [d for d in res.diagnostics if d.code == "nvcc" and d.severity.value == "error"]
    assert err.path == str(DATA / "kernel_error.cu") and err.line == 4
    assert "not_declared" in err.message


@needs_nvcc
def test_cli_json_contract() -> None:
    env = dict(os.environ)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stitch_lsp",
            "verify",
            str(DATA / "ref_bias_relu.py"),
            str(DATA / "cand_compile_error.py"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["status"] == "compile_error"
    VerifyResult.model_validate(data)
    for d in data["diagnostics"]:
        assert set(d) >= {"path", "line", "column", "severity", "code", "message"}


@needs_nvcc
def test_cli_text_report() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stitch_lsp",
            "verify",
            str(DATA / "pair_good.py"),
            str(DATA / "pair_good.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 1  # no_gpu is not a pass
    assert proc.stdout.startswith("status: no_gpu")
    assert "build: fastcuda bias_relu_pair" in proc.stdout


@needs_nvcc
def test_worker_without_torch_still_builds_generated_code(tmp_path: Path) -> None:
    """A worker Python with no torch: the fastcuda sources are found statically and built."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch hidden for this test')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), env.get("PYTHONPATH", "")])
    req = VerifyRequest(
        reference=str(DATA / "ref_bias_relu.py"), candidate=str(DATA / "cand_good.py")
    )
    res = run_worker(req, python=sys.executable, env=env, timeout_s=120)
    assert res.status is VerifyStatus.no_gpu, (res.message, res.log_tail)
    assert "torch is not installed" in res.message
    assert res.build and res.build.kind == "fastcuda"
    bad = req.model_copy(update={"candidate": str(DATA / "cand_compile_error.py")})
    res = run_worker(bad, python=sys.executable, env=env, timeout_s=120)
    assert res.status is VerifyStatus.compile_error
    assert any("undeclared_helper" in d.message for d in res.diagnostics)


def test_server_side_never_imports_torch() -> None:
    code = (
        "import sys, stitch_lsp.verify, stitch_lsp.verify.command, stitch_lsp.runtime\n"
        "from stitch_lsp.verify import verify, DevicePool\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
