"""GPU discovery without torch: Settings.device, `nvidia-smi -L`, CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stitch_lsp.server.devices import discover_gpus, no_gpu_message


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'echo "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)"\n'
        'echo "GPU 1: NVIDIA H200 (UUID: GPU-bbbb)"\n'
        'echo "GPU 2: NVIDIA H200 (UUID: GPU-cccc)"\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return smi


def test_every_listed_gpu(fake_smi: Path) -> None:
    assert discover_gpus() == ["cuda:0", "cuda:1", "cuda:2"]


def test_the_setting_pins_one(fake_smi: Path) -> None:
    assert discover_gpus("cuda:1") == ["cuda:1"]


def test_cuda_visible_devices_narrows_and_renumbers(
    fake_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert discover_gpus() == ["cuda:0", "cuda:1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert discover_gpus() == []


def test_no_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert discover_gpus() == []
    assert "nvidia-smi not found" in no_gpu_message()


def test_failing_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert discover_gpus() == []
