"""One Ray head for the whole test session, on 127.0.0.1, with three GPUs that do not exist.

Ray counts GPUs as a resource: declaring `num_gpus=3` on a machine without any lets the tests
check scheduling (one job per GPU, each actor its own CUDA_VISIBLE_DEVICES) while the jobs only
compile. Node files go to a private cache folder.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

FAKE_GPUS = 3


@pytest.fixture(scope="session")
def node_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("node-cache")


@pytest.fixture(scope="session")
def ray_head(node_cache: Path) -> Iterator[object]:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("the cluster tests need Ray (pip install -e '.[dev]')")
    from stitch_lsp.cluster.session import LOOPBACK_ENV, connect

    # Before `ray` is imported: the head and everything it starts stay on 127.0.0.1.
    os.environ[LOOPBACK_ENV] = "0"
    os.environ["STITCH_CLUSTER_CACHE"] = str(node_cache)
    session = connect(None, num_cpus=2, num_gpus=FAKE_GPUS, object_store_memory=128 * 1024 * 1024)
    yield session
    session.close()
    os.environ.pop("STITCH_CLUSTER_CACHE", None)
