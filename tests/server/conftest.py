"""The `client` fixture: a real `python -m stitch_lsp serve` subprocess behind a pytest-lsp client.

Each test calls `initialize(client, tmp_path, ...)` itself, so it can choose settings and trust.
"""

from __future__ import annotations

import pytest_lsp

from tests.server.lsp_client import SERVER, SERVER_WITH_FAKES, StitchClient


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER_WITH_FAKES)
async def fake_client(lsp_client: StitchClient):
    """The server with the test feature module loaded as well."""
    yield
    await lsp_client.shutdown_session()
