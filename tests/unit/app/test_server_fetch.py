"""The model pulled at start (OVMS's pull-and-start) is fetched after the ports open: a fetch
that fails, in whatever way, ends the server with 1 rather than leaving it up with nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graphrt.server import ModelFetch, StartupError, serve
from graphrt.serving.settings import ServerSettings


@pytest.mark.parametrize(
    "error",
    [
        StartupError("test-org/none is not in the Hugging Face cache"),
        PermissionError("[Errno 13] Permission denied: 'models/test-org'"),
        ValueError("No closing quotation"),
    ],
)
def test_a_fetch_that_fails_ends_the_server_with_1(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    def fetch() -> Path:
        raise error

    settings = ServerSettings(rest_port=0, graph_stats=False, shutdown_timeout=1)
    fetching = ModelFetch("test-org/none", "pulling test-org/none", fetch)
    status = asyncio.run(asyncio.wait_for(serve(settings, fetching), timeout=30))
    assert status == 1
    assert str(error) in caplog.text
