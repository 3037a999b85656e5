"""The GPU inventory without torch: nvidia-smi, CUDA_VISIBLE_DEVICES, architectures, the cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stitch_lsp import gpus
from stitch_lsp.gpus import build_arch, inventory
from stitch_lsp.workers.devices import discover_gpus, no_gpu_message, torch_missing

QUERY = (
    "0, GPU-aaaa, NVIDIA H200, 9.0, 143771\n"
    "1, GPU-bbbb, NVIDIA H200, 9.0, 143771\n"
    "2, GPU-cccc, NVIDIA A100-SXM4-80GB, 8.0, 81920\n"
)
LISTING = (
    "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n"
    "GPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n"
    "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-cccc)\n"
)


def _smi(folder: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + f"echo called >> {folder / 'calls'}\n" + body)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("STITCH_CUDA_ARCH", raising=False)
    return smi


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver that answers the inventory's query."""
    body = f'case "$*" in\n  *--query-gpu=index,uuid,name,compute_cap*) printf "{QUERY}" ;;\n'
    body += f'  *) printf "{LISTING}" ;;\nesac\n'
    return _smi(tmp_path / "bin", body, monkeypatch)


@pytest.fixture
def old_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver that knows only `nvidia-smi -L` (it prints the listing whatever it is asked)."""
    return _smi(tmp_path / "old", f'printf "{LISTING}"\n', monkeypatch)


def test_every_listed_gpu(fake_smi: Path) -> None:
    assert discover_gpus() == ["cuda:0", "cuda:1", "cuda:2"]
    inv = inventory()
    assert [g.arch for g in inv.gpus] == ["sm_90a", "sm_90a", "sm_80"]
    assert inv.gpus[2].name == "NVIDIA A100-SXM4-80GB" and inv.gpus[2].memory_mib == 81920


def test_the_setting_pins_one(fake_smi: Path) -> None:
    assert discover_gpus("cuda:1") == ["cuda:1"]


def test_cuda_visible_devices_narrows_and_renumbers(
    fake_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    inv = inventory()
    assert inv.devices() == ["cuda:0", "cuda:1"]
    assert [inv.physical(d) for d in inv.devices()] == ["2", "0"]  # what a worker must be given
    assert build_arch("cuda:0") == "sm_80" and build_arch("cuda:1") == "sm_90a"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-cc,MIG-x,0")
    inv = inventory()
    assert [g.physical for g in inv.gpus] == ["GPU-bbbb", "GPU-cc"]  # CUDA stops at MIG-x
    assert inv.gpus[1].name.startswith("NVIDIA A100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert discover_gpus() == []
    assert "hides every GPU" in no_gpu_message()


def test_an_older_driver_is_read_from_its_listing(old_smi: Path) -> None:
    inv = inventory()
    assert inv.devices() == ["cuda:0", "cuda:1", "cuda:2"]
    assert inv.gpus[0].uuid == "GPU-aaaa" and inv.gpus[0].compute_capability is None
    assert build_arch() == "sm_90a"  # the one fallback when the driver does not say


def test_asked_once_per_process(fake_smi: Path) -> None:
    for _ in range(5):
        inventory()
        build_arch()
    assert (fake_smi.parent / "calls").read_text().count("called") == 1
    inventory(refresh=True)
    assert (fake_smi.parent / "calls").read_text().count("called") == 2


def test_arch_policy(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCH_CUDA_ARCH", "8.9")
    assert build_arch() == "sm_89"
    monkeypatch.delenv("STITCH_CUDA_ARCH")
    assert build_arch() == "sm_90a"
    from stitch_lsp.runtime.fastcuda import detect_arch

    assert detect_arch() == "sm_90a"


def test_no_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert discover_gpus() == []
    assert "nvidia-smi not found" in no_gpu_message()
    assert build_arch() == gpus.DEFAULT_ARCH


def test_failing_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n", monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert discover_gpus() == []
    assert "NVIDIA-SMI has failed" in no_gpu_message()


def test_torch_probe_of_a_python_that_never_answers(tmp_path: Path) -> None:
    """A workers' Python that hangs and leaves a child holding its output: the probe ends at its
    time limit with a sentence, and kills the child too."""
    import time

    pids = tmp_path / "pids"
    fake = tmp_path / "hanging-python"
    fake.write_text(f'#!/bin/sh\nsleep 300 &\necho $! > "{pids}"\nwait\n')
    fake.chmod(0o755)
    started = time.monotonic()
    said = torch_missing(str(fake), timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert said is not None and "did not answer within 1 s" in said
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the probe's child outlived it")


def test_torch_probe_answers(tmp_path: Path) -> None:
    has, lacks = tmp_path / "has", tmp_path / "lacks"
    has.write_text("#!/bin/sh\nexit 0\n")
    lacks.write_text("#!/bin/sh\nexit 3\n")
    for f in (has, lacks):
        f.chmod(0o755)
    assert torch_missing(str(has)) is None
    said = torch_missing(str(lacks))
    assert said is not None and said.startswith("torch is missing")
