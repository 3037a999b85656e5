"""`stitch-lsp bench --ray ADDRESS` and `generate --ray ADDRESS` against the tests' Ray head."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stitch_lsp.cluster.session import LOOPBACK_ENV
from tests.cluster.conftest import FAKE_GPUS

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed"),
]


def _address() -> str:
    import ray

    address = str(ray.get_runtime_context().gcs_address)
    assert address.startswith("127.0.0.1:"), address
    return address


def _cli(args: list[str], cwd: Path, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCH_")}
    env["STITCH_CACHE_DIR"] = str(cwd / "build")
    env["PYTHONPATH"] = str(REPO)
    env[LOOPBACK_ENV] = "0"  # the tests' head is on 127.0.0.1 only
    return subprocess.run(
        [sys.executable, "-m", "stitch_lsp", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_bench_runs_in_parallel_over_the_clusters_gpus(
    ray_head: object, kernelbench_dir: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    out = _cli(
        [
            *("bench", str(kernelbench_dir), "--level", "2", "--only", "1,17,21"),
            *("--ray", _address(), "--json", str(tmp_path / "bench.json")),
            *("--out", str(tmp_path / "candidates")),
        ],
        tmp_path,
    )
    wall = time.monotonic() - started
    # Exit 1: no candidate was verified correct (there is no GPU to run them on).
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-4000:]
    assert f"{FAKE_GPUS:g} GPU(s)" in out.stderr
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["devices"] == [f"ray:{i}" for i in range(FAKE_GPUS)]
    rows = report["rows"]
    assert [r["handled"] for r in rows] == [True] * 3
    # Each job held one of the cluster's GPUs (which exist only as a Ray resource here, so the
    # worker built the candidate and said it could not run it).
    assert {r["status"] for r in rows} == {"no_gpu"}, [r["reason"] for r in rows]
    gpus = {r["device"].rsplit("/", 1)[-1] for r in rows}
    assert gpus <= {f"gpu{i}" for i in range(FAKE_GPUS)}
    assert len(gpus) > 1, "every job ran on the same GPU: not parallel"
    assert all(Path(r["candidate"]).is_file() for r in rows)
    assert sum(r["verify_s"] for r in rows) > 0 and wall > 0


def test_generate_on_the_cluster_and_export_its_trajectories(
    ray_head: object, kernelbench_dir: Path, tmp_path: Path
) -> None:
    ref = tmp_path / "19_ReLU.py"
    shutil.copy(kernelbench_dir / "level1" / "19_ReLU.py", ref)
    out = _cli(
        [
            *("generate", str(ref), "--coder", "builtin", "--ray", _address()),
            *("--trajectories-dir", str(tmp_path / "traj")),
        ],
        tmp_path,
    )
    # Full verification was asked for and ran on a cluster GPU (a Ray resource only, here).
    assert "verify full" in out.stderr, out.stderr[-4000:]
    assert "no_gpu" in out.stderr or "not run" in out.stderr, out.stderr[-4000:]
    exported = tmp_path / "all.jsonl"
    exp = _cli(["export-trajectories", str(tmp_path / "traj"), "-o", str(exported)], tmp_path)
    assert exp.returncode == 0, exp.stderr
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert records and records[0]["metadata"]["verify_mode"] == "full"
    assert records[0]["metadata"]["reference"].endswith("19_ReLU.py")
    assert records[0]["verify"]["status"] == "no_gpu"
