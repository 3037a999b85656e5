from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.fake_openai import FakeOpenAI
from tests.agents.helpers import REFERENCE


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    path = tmp_path / "relu_model.py"
    path.write_text(REFERENCE, encoding="utf-8")
    return path
