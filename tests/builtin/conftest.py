"""Build every GPU test's CUDA in parallel up front, so the GPU tests only load and run."""

from __future__ import annotations

import contextlib
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .helpers import generate_for, write_problem
from .problems import PROBLEMS
from .problems_l3 import EINOPS, L3, SMALL_LEVEL3, small_level3

_NAME = re.compile(r'load_cuda\(CUDA_SOURCE, name="(\w+)",\s*libraries=\(([^)]*)\)\)')


def _prebuild(folder: Path) -> None:
    from tests.conftest import KERNELBENCH

    problems = dict(PROBLEMS) | L3 | EINOPS
    problems |= {"s" + n: small_level3(KERNELBENCH, n) for n in SMALL_LEVEL3}
    _prebuild_sources(folder, problems)


def _prebuild_sources(folder: Path, problems: dict[str, str]) -> None:
    from stitch_lsp.runtime import build_cuda

    jobs = []
    for name, source in problems.items():
        try:
            cand = generate_for(write_problem(folder, name, source))
        except Exception:  # the test that needs it reports the failure
            continue
        if not cand.handled or not cand.source or not cand.cuda_source:
            continue
        m = _NAME.search(cand.source)
        if m:
            libs = tuple(s.strip().strip("'\"") for s in m.group(2).split(",") if s.strip())
            jobs.append((cand.cuda_source, m.group(1), libs))
    with ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(lambda j: _safe_build(build_cuda, *j), jobs))


def _safe_build(build, source: str, name: str, libs: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(Exception):  # the test that needs it reports the failure
        build(source, name=name, libraries=libs)


@pytest.fixture(scope="session", autouse=True)
def _prebuild_for_gpu(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.conftest import gpu_reason

    wants_gpu = any(
        "gpu" in item.keywords
        and ("test_gpu_correctness" in item.nodeid or "test_gpu_l3" in item.nodeid)
        for item in request.session.items
    )
    if wants_gpu and gpu_reason() is None:
        _prebuild(tmp_path_factory.mktemp("prebuild"))
    yield
