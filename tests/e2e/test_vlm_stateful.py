"""`--pipeline_type VLM`: the stateful VLMPipeline servable (OVMS's NPU path), one request at a
time, with images; started with no media flags, so only base64 data URLs are accepted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
import pytest

if TYPE_CHECKING:
    from conftest import LaunchExact, Pictures, Server, VlmGolden

MODEL = "tiny-vlm-stateful"
MAX_TOKENS = 24
SIZES = [(100, 140), (64, 80), (200, 90)]


@pytest.fixture(scope="module")
def stateful_server(tiny_vlm_dir: Path, launch_exact: LaunchExact) -> Iterator[Server]:
    # At DEBUG the log has each engine request's first tokens and end, in the engine's order.
    args = ["--model_path", str(tiny_vlm_dir), "--model_name", MODEL, "--pipeline_type", "VLM"]
    args += ["--log_level", "DEBUG"]
    with launch_exact(args, model=MODEL) as server:
        yield server


@pytest.fixture(scope="module")
def client(stateful_server: Server) -> Iterator[openai.OpenAI]:
    with stateful_server.client() as sdk:
        yield sdk


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def conversation(urls: Sequence[str], question: str = "What is this?") -> list[Any]:
    """All images but the last in a first user message, the last one after a reply."""
    if len(urls) == 1:
        return [
            {"role": "user", "content": [{"type": "text", "text": question}, image_part(urls[0])]}
        ]
    return [
        {"role": "user", "content": [image_part(url) for url in urls[:-1]]},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [image_part(urls[-1]), {"type": "text", "text": question}]},
    ]


@pytest.mark.parametrize(("count", "stream"), [(1, False), (2, True), (3, False), (3, True)])
def test_images_match_the_engine(
    client: openai.OpenAI,
    pictures: Pictures,
    vlm_stateful_golden: VlmGolden,
    count: int,
    stream: bool,
) -> None:
    images = [pictures.make(*SIZES[i], seed=50 + i) for i in range(count)]
    messages = conversation([pictures.png_url(image) for image in images])
    expected = vlm_stateful_golden.chat(messages, images, MAX_TOKENS)

    if stream:
        chunks = client.chat.completions.create(
            model=MODEL,
            messages=messages,
            temperature=0,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        texts: list[str] = []
        usage = None
        with chunks:
            for chunk in chunks:
                usage = chunk.usage or usage
                texts.extend(choice.delta.content or "" for choice in chunk.choices)
        assert "".join(texts) == expected.text
    else:
        response = client.chat.completions.create(
            model=MODEL, messages=messages, temperature=0, max_tokens=MAX_TOKENS
        )
        assert response.choices[0].message.content == expected.text
        assert response.choices[0].finish_reason == "length"
        usage = response.usage
    assert usage is not None
    assert usage.prompt_tokens == expected.prompt_tokens
    assert usage.completion_tokens == MAX_TOKENS


def test_requests_are_served_one_at_a_time(
    stateful_server: Server, pictures: Pictures, vlm_stateful_golden: VlmGolden
) -> None:
    """Two streams sent together: both answers are right, and the engine produced the second
    request's first tokens only after it had finished the first (the VLM_CB servable
    interleaves them instead). Judged by the order in which the server received the engine's
    outputs (its DEBUG log), not by when a client thread read its socket, which on a busy
    machine says little about what the server did."""
    images = [pictures.make(*SIZES[i], seed=60 + i) for i in range(2)]
    conversations = [conversation([pictures.png_url(image)]) for image in images]
    expected = [
        vlm_stateful_golden.chat(m, [i], 150) for m, i in zip(conversations, images, strict=True)
    ]

    def one(messages: list[Any]) -> str:
        with stateful_server.client() as sdk:
            stream = sdk.chat.completions.create(
                model=MODEL, messages=messages, temperature=0, max_tokens=150, stream=True
            )
            return "".join(
                chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
            )

    since = len(stateful_server.log())
    with ThreadPoolExecutor(2) as pool:
        answers = [run.result(60) for run in [pool.submit(one, m) for m in conversations]]

    assert answers == [e.text for e in expected]
    events = [(e.kind, e.request) for e in stateful_server.engine_events(since)]
    outputs = [event for event in events if event[0] != "submitted"]
    (_, first), (_, second) = [event for event in outputs if event[0] == "first"]
    assert outputs == [
        ("first", first),
        ("finished", first),
        ("first", second),
        ("finished", second),
    ]


def test_local_files_are_off_by_default(stateful_server: Server) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 4,
        "messages": conversation(["/etc/hostname"]),
    }
    with stateful_server.http() as http:
        response = http.post("/v3/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "Loading images from local filesystem is disabled."
    assert error["param"] == "messages[0].content[1].image_url.url"


def test_urls_are_off_by_default(stateful_server: Server) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 4,
        "messages": conversation(["http://127.0.0.1:9/zebra.png"]),
    }
    with stateful_server.http() as http:
        response = http.post("/v3/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "Given url does not match any allowed domain from allowed_media_domains"
    )


def test_logprobs_refused(client: openai.OpenAI, pictures: Pictures) -> None:
    messages = conversation([pictures.png_url(pictures.make(*SIZES[0], seed=70))])
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=4,
            logprobs=True,
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == "logprobs"
