"""POST /v1/config/reload, end to end, on a server that does not poll (poll interval 0).

Adding a servable to config.json does nothing until the reload, which answers 201 once it is
loaded; a reload with nothing new answers 200. Editing a servable's graph (max_tokens_limit: 5)
and reloading replaces it while a stream to it is open: the stream runs to its end on the old
graph, and new requests follow the new one. Loading a servable never stalls the others: their
streams keep flowing and /v2/health/live keeps answering.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import ExactServer, GraphRepository, LaunchExact

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
NEW_LIMIT = 5
# Long enough to outlast loading the replacement copy of the tiny llama, three times over: the
# load took ~1.5 s beside the stream, which runs at ~650 tokens a second on two cores.
STREAM_TOKENS = 4000
AFTER_RELOAD = 20  # chunks the stall test reads after the reload answered
# Longest pause allowed in a stream, or for /v2/health/live, while another servable loads.
MAX_STALL = 1.0


def states(http: httpx.Client) -> dict[str, str]:
    config = http.get("/v1/config").json()
    return {name: entry["model_version_status"][0]["state"] for name, entry in config.items()}


def status_states(body: dict[str, Any]) -> dict[str, str]:
    return {name: entry["model_version_status"][0]["state"] for name, entry in body.items()}


async def data_lines(response: httpx.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield line[len("data:") :].strip()


@pytest.fixture(scope="module")
def repository(graph_repository: Callable[[str], GraphRepository]) -> GraphRepository:
    return graph_repository("reloaded")


@pytest.fixture(scope="module")
def manual(repository: GraphRepository, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    # A removed or replaced servable drains its open streams for up to --shutdown_timeout; a
    # slow (shared) machine must not turn the drain into a cut.
    args = [
        "--config_path",
        str(repository.config),
        "--file_system_poll_wait_seconds",
        "0",
        "--shutdown_timeout",
        "600",
    ]
    with launch_exact(args) as server:
        yield server


def test_reload_adds_a_servable(manual: ExactServer, repository: GraphRepository) -> None:
    repository.serve(["base", "added"])
    with manual.http() as http:
        time.sleep(1.5)  # polling is off: nothing happens by itself
        assert states(http) == {"base": "AVAILABLE"}

        response = http.post("/v1/config/reload")
        assert response.status_code == 201, response.text
        # The answer comes once the new servable is loaded, with the new status.
        assert status_states(response.json()) == {"base": "AVAILABLE", "added": "AVAILABLE"}

        again = http.post("/v1/config/reload")
        assert again.status_code == 200, again.text
        assert status_states(again.json()) == {"base": "AVAILABLE", "added": "AVAILABLE"}

    with manual.client() as sdk:
        reply = sdk.chat.completions.create(model="added", messages=ITALY, max_tokens=5)
        assert reply.model == "added"
        assert reply.choices[0].message.content
        assert sorted(model.id for model in sdk.models.list()) == ["added", "base"]


async def test_changed_graph_replaces_the_servable_after_its_open_stream(
    manual: ExactServer, repository: GraphRepository
) -> None:
    body = {
        "model": "base",
        "messages": [{"role": "user", "content": "Tell me a long story about a dragon."}],
        "max_tokens": STREAM_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    received: list[str] = []
    async with (
        httpx.AsyncClient(base_url=manual.base_url, timeout=120.0) as ahttp,
        ahttp.stream("POST", "/v3/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200

        async def read() -> None:
            async for payload in data_lines(response):
                received.append(payload)

        reader = asyncio.create_task(read())
        while len(received) < 3:
            await asyncio.sleep(0.01)

        repository.add_graph("base", max_tokens_limit=NEW_LIMIT)
        reload = await ahttp.post("/v1/config/reload")
        assert reload.status_code == 201, reload.text
        assert status_states(reload.json())["base"] == "AVAILABLE"
        # The replacement was loaded while the stream ran (else this test proves nothing).
        assert not reader.done(), "the stream ended before the reload; raise STREAM_TOKENS"

        refused = await ahttp.post(
            "/v3/chat/completions", json={"model": "base", "messages": ITALY, "max_tokens": 10}
        )
        await reader

    # The open stream ran to its end on the old graph (its max_tokens is above the new limit).
    assert received[-1] == "[DONE]", received[-3:]
    chunks = [json.loads(payload) for payload in received[:-1]]
    assert not [chunk for chunk in chunks if "error" in chunk]
    assert chunks[-1]["usage"]["completion_tokens"] == STREAM_TOKENS

    # New requests follow the new graph.
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "max_tokens"
    assert str(NEW_LIMIT) in error["message"]
    with manual.client() as sdk:
        with pytest.raises(openai.BadRequestError):
            sdk.chat.completions.create(model="base", messages=ITALY, max_tokens=10)
        reply = sdk.chat.completions.create(model="base", messages=ITALY, max_tokens=3)
        assert reply.usage is not None and reply.usage.completion_tokens <= 3
    with manual.http() as http:
        assert http.post("/v1/config/reload").status_code == 200


async def test_loading_a_servable_does_not_stall_other_streams(
    manual: ExactServer, repository: GraphRepository
) -> None:
    """The engine runs in its own process; the HTTP server must keep serving while one loads.

    Here `base` gets its limit back (a reload replaces it) while a stream to `added` is open;
    the client reads AFTER_RELOAD more chunks once the reload answered, then leaves.
    """
    repository.serve(["base", "added"])
    body = {
        "model": "added",
        "messages": [{"role": "user", "content": "Tell me a long story about a dragon."}],
        "max_tokens": STREAM_TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    stamps: list[float] = []
    live: list[float] = []
    async with (
        httpx.AsyncClient(base_url=manual.base_url, timeout=120.0) as ahttp,
        httpx.AsyncClient(base_url=manual.base_url, timeout=120.0) as probe,
        ahttp.stream("POST", "/v3/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200

        reloaded = float("inf")
        after: list[float] = []  # the stamps that came after the reload answered

        async def read() -> list[str]:
            payloads = []
            async for payload in data_lines(response):
                payloads.append(payload)
                stamps.append(time.monotonic())
                if stamps[-1] > reloaded:
                    after.append(stamps[-1])
                    if len(after) == AFTER_RELOAD:
                        break
            return payloads

        async def probe_live(stop: asyncio.Event) -> None:
            while not stop.is_set():
                started = time.monotonic()
                assert (await probe.get("/v2/health/live")).status_code == 200
                live.append(time.monotonic() - started)
                await asyncio.sleep(0.05)

        reader = asyncio.create_task(read())
        while len(stamps) < 3:
            await asyncio.sleep(0.01)
        stop = asyncio.Event()
        prober = asyncio.create_task(probe_live(stop))

        repository.add_graph("base")  # no max_tokens_limit any more
        reload = await ahttp.post("/v1/config/reload")
        reloaded = time.monotonic()
        stop.set()
        await prober
        payloads = await reader

    assert reload.status_code == 201, reload.text
    assert "[DONE]" not in payloads and "error" not in payloads[-1], payloads[-1]
    with manual.client() as sdk:
        reply = sdk.chat.completions.create(model="base", messages=ITALY, max_tokens=10)
        assert reply.choices[0].message.content

    # The load happened while the stream ran (else this test proves nothing), and it went on.
    assert len(after) == AFTER_RELOAD, "the stream ended before the reload; raise STREAM_TOKENS"
    gaps = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    assert max(gaps) < MAX_STALL, (
        f"the stream to `added` stalled for {max(gaps):.1f} s while `base` loaded"
    )
    assert max(live) < MAX_STALL, (
        f"/v2/health/live took {max(live):.1f} s to answer while `base` loaded"
    )
