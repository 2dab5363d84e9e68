"""How image and audio requests live beside the rest of the server.

They run off the event loop, one at a time per model, behind a bounded queue: health checks and
a streaming chat go on while images are generated; a full queue answers 503 with Retry-After; a
client that disconnects stops its generation at the next denoising step (the steps counted for
it stay far below what it asked for); /metrics counts requests, steps and the queue; and the
models are listed with the LLM beside them.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from servables.image_gen.protocol import preview_steps

if TYPE_CHECKING:
    from conftest import ExactServer

IMAGE_MODEL = "tiny-sd"
BOUNDED_IMAGE_MODEL = "tiny-sd-no-queue"
LLM_MODEL = "smollm2"
# Generations long enough to overlap with others (~30 ms per denoising step at 256 px, more on a
# busy machine): SLOW outlasts the half second before a second request, the BURST images together
# outlast a 40-token chat stream.
SLOW = {"size": "256x256", "num_inference_steps": 50}
BURST = {"size": "256x256", "num_inference_steps": 30}
BURST_IMAGES = 4
HEALTH_CHECK_SECONDS = 0.02


def image_request(model: str = IMAGE_MODEL, **extra: object) -> dict[str, object]:
    return {"model": model, "prompt": "a busy street at night", **SLOW, **extra}


def test_every_model_is_listed(media_server: ExactServer) -> None:
    with media_server.http() as http:
        names = {entry["id"] for entry in http.get("/v3/models").json()["data"]}
    assert {IMAGE_MODEL, BOUNDED_IMAGE_MODEL, "tiny-whisper", "tiny-speecht5", LLM_MODEL} <= names


async def test_images_do_not_stall_health_checks_or_a_chat_stream(
    media_server: ExactServer,
) -> None:
    """Slow image requests, a streaming chat and health checks at once: every health check is
    answered, and the chat streams all its tokens while images are still being generated.

    Tokens are counted from the stream's usage, not its chunks: the tiny llama can outrun the
    client, and the server then sends several tokens in one chunk."""
    chat_tokens = 40
    async with httpx.AsyncClient(base_url=media_server.base_url, timeout=300) as http:
        images = [
            asyncio.create_task(
                http.post("/v3/images/generations", json={**image_request(), **BURST})
            )
            for _ in range(BURST_IMAGES)
        ]
        chat_done = asyncio.Event()
        health_codes: list[int] = []

        async def check_health() -> None:
            while not chat_done.is_set():
                health_codes.append((await http.get("/v2/health/ready")).status_code)
                await asyncio.sleep(HEALTH_CHECK_SECONDS)

        checks = asyncio.create_task(check_health())
        await asyncio.sleep(0.5)  # the first image is on the pipeline, the others wait
        usage: dict[str, Any] = {}
        async with http.stream(
            "POST",
            "/v3/chat/completions",
            json={
                "model": LLM_MODEL,
                "messages": [{"role": "user", "content": "Count from one to twenty."}],
                "max_tokens": chat_tokens,
                "ignore_eos": True,  # the tiny random llama may end at any token otherwise
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ) as chat:
            assert chat.status_code == 200
            async for line in chat.aiter_lines():
                if line.startswith("data: {"):
                    usage = json.loads(line.removeprefix("data: ")).get("usage") or usage
        chat_done.set()
        await checks
        assert usage.get("completion_tokens") == chat_tokens, usage
        assert sum(task.done() for task in images) < len(images)
        replies = await asyncio.gather(*images)
    assert len(health_codes) > 5 and set(health_codes) == {200}, health_codes
    assert [reply.status_code for reply in replies] == [200] * BURST_IMAGES


def test_a_full_queue_is_503_with_retry_after(media_server: ExactServer) -> None:
    async def race() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=media_server.base_url, timeout=300) as http:
            first = asyncio.create_task(
                http.post("/v3/images/generations", json=image_request(BOUNDED_IMAGE_MODEL))
            )
            await asyncio.sleep(0.5)
            second = await http.post(
                "/v3/images/generations", json=image_request(BOUNDED_IMAGE_MODEL)
            )
            return [await first, second]

    first, second = asyncio.run(race())
    assert first.status_code == 200
    assert second.status_code == 503
    assert int(second.headers["Retry-After"]) >= 1
    assert second.json()["error"]["code"] == "queue_full"


def metric(server: ExactServer, name: str, model: str) -> float:
    with server.http() as http:
        text = http.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'name="{model}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_disconnect_stops_the_generation(media_server: ExactServer) -> None:
    """The stream is dropped after its first preview: the generation stops within a step or
    two (not the 100 asked for) and the pipeline is free for the next request."""
    steps_before = metric(media_server, "graphrt_pipeline_steps_total", IMAGE_MODEL)
    cancelled_before = metric(media_server, "graphrt_pipeline_cancelled_total", IMAGE_MODEL)
    body = image_request(stream=True, partial_images=3, num_inference_steps=100)
    with (
        httpx.Client(base_url=media_server.base_url, timeout=300) as http,
        http.stream("POST", "/v3/images/generations", json=body) as response,
    ):
        for line in response.iter_lines():
            if "partial_image" in line:
                break  # leaving the block closes the connection mid-stream
    deadline = time.monotonic() + 60
    while metric(media_server, "graphrt_pipeline_requests_running", IMAGE_MODEL) > 0:
        assert time.monotonic() < deadline, "the pipeline was not freed"
        time.sleep(0.05)
    steps = metric(media_server, "graphrt_pipeline_steps_total", IMAGE_MODEL) - steps_before
    # The preview went out after step 25 of 101; the job stops at the first step after the
    # disconnect reaches it (a step here is ~30 ms: ten steps of slack for a loaded machine, still
    # far below the 100 asked for).
    first_preview = preview_steps(101, 3)[0] + 1
    assert first_preview <= steps <= first_preview + 10, f"{steps} steps ran"
    assert metric(media_server, "graphrt_pipeline_cancelled_total", IMAGE_MODEL) > cancelled_before
    with media_server.http() as http:
        reply = http.post("/v3/images/generations", json={**image_request(), "size": "64x64"})
    assert reply.status_code == 200


@pytest.mark.parametrize("model", ["tiny-whisper", "tiny-speecht5", IMAGE_MODEL])
def test_requests_are_counted(media_server: ExactServer, model: str) -> None:
    with media_server.http() as http:
        text = http.get("/metrics").text
    for family in (
        "graphrt_pipeline_requests_total",
        "graphrt_pipeline_request_seconds_bucket",
        "graphrt_pipeline_step_seconds_count",
        "graphrt_pipeline_requests_queued",
    ):
        assert any(
            line.startswith(family) and f'name="{model}"' in line for line in text.splitlines()
        ), family


def test_the_graph_page_shows_the_pipeline(media_server: ExactServer) -> None:
    with media_server.http() as http:
        reply = http.post(
            "/v3/images/generations",
            json={"model": IMAGE_MODEL, "prompt": "a kite", "size": "64x64"},
        )
        assert reply.status_code == 200
        stats = http.get(f"/graphs/{IMAGE_MODEL}/stats").json()
        page = http.get(f"/graphs/{IMAGE_MODEL}").text
    (node,) = stats["nodes"]
    assert node["name"] == "ImageGenExecutor" and node["calls"] >= 1
    pipeline = stats["pipelines"]["ImageGenExecutor"]
    assert pipeline["requests"] >= 1 and pipeline["steps"] > 0
    assert 'data-line="2"' in page  # room for the pipeline's line in the node's box
    assert "models_path" in page  # the node's options shown decoded, not as an empty block


@pytest.mark.system
def test_the_page_in_a_browser_shows_the_pipeline(media_server: ExactServer, browser: Any) -> None:
    page = browser.new_page()
    page.goto(f"{media_server.base_url}/graphs/{IMAGE_MODEL}")
    node = page.locator('.node[data-node="0"]')
    assert "ImageGenExecutor" in (node.text_content() or "")
    page.wait_for_selector("#live.on")
    with media_server.http() as http:
        reply = http.post(
            "/v3/images/generations",
            json={"model": IMAGE_MODEL, "prompt": "a kite", "size": "64x64"},
        )
    assert reply.status_code == 200
    page.wait_for_function(
        "(document.querySelector('.node[data-node=\"0\"]').textContent || '').includes('steps')",
        timeout=20_000,
    )
    node.click()
    details = page.locator("#details").inner_text()
    assert "ImageGenCalculator" in details and "pipeline running / waiting" in details
