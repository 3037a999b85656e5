"""The pytest-lsp `client` fixture for export end-to-end tests (a real `stitch-lsp serve`)."""

from __future__ import annotations

try:
    import pytest_lsp

    from tests.server.lsp_client import SERVER, StitchClient
except ImportError:  # a bare GPU box may lack pytest-lsp; the GPU tests need none of it
    pytest_lsp = None

if pytest_lsp is not None:

    @pytest_lsp.fixture(config=SERVER)
    async def client(lsp_client: StitchClient):
        yield
        await lsp_client.shutdown_session()
