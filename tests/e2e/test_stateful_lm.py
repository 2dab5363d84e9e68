"""`--pipeline_type LM`: the stateful LLMPipeline servable, one request at a time."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Launch, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
NUMBERS: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Write the numbers from one to ten in words."}
]


@pytest.fixture(scope="module")
def lm_server(smollm2_gguf: Path, launch: Launch) -> Iterator[Server]:
    with launch(["--model_path", str(smollm2_gguf), "--pipeline_type", "LM"]) as server:
        yield server


@pytest.fixture(scope="module")
def lm_client(lm_server: Server) -> Iterator[openai.OpenAI]:
    with lm_server.client() as client:
        yield client


def test_chat_matches_golden(lm_client: openai.OpenAI, lm_server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)

    response = lm_client.chat.completions.create(
        model=lm_server.model, messages=ITALY, temperature=0, max_tokens=30
    )

    assert response.choices[0].message.content == expected.text
    assert response.choices[0].finish_reason == "stop"
    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == expected.completion_tokens


def test_length_finish(lm_client: openai.OpenAI, lm_server: Server, golden: Golden) -> None:
    expected = golden.chat(NUMBERS, 8)
    assert expected.finish_reason == "length"

    response = lm_client.chat.completions.create(
        model=lm_server.model, messages=NUMBERS, temperature=0, max_tokens=8
    )

    assert response.choices[0].message.content == expected.text
    assert response.choices[0].finish_reason == "length"


async def test_two_concurrent_requests_both_complete(lm_server: Server, golden: Golden) -> None:
    prompts = [ITALY, NUMBERS]
    expected = [golden.chat(messages, 24) for messages in prompts]

    async with lm_server.async_client() as client:

        async def ask(messages: list[ChatCompletionMessageParam]) -> str:
            stream = await client.chat.completions.create(
                model=lm_server.model,
                messages=messages,
                temperature=0,
                max_tokens=24,
                stream=True,
            )
            async with stream:
                return "".join(
                    [c.choices[0].delta.content or "" async for c in stream if c.choices]
                )

        texts = await asyncio.wait_for(asyncio.gather(*(ask(m) for m in prompts)), 120)

    assert texts == [e.text for e in expected]


def test_stop_string(lm_client: openai.OpenAI, lm_server: Server, golden: Golden) -> None:
    full = golden.chat(ITALY, 30).text
    assert "Rome" in full

    response = lm_client.chat.completions.create(
        model=lm_server.model, messages=ITALY, temperature=0, max_tokens=30, stop=["Rome"]
    )

    assert response.choices[0].message.content == full[: full.index("Rome")]
    assert response.choices[0].finish_reason == "stop"


def test_disconnect_frees_the_pipeline(lm_server: Server, golden: Golden) -> None:
    """The stateful pipeline serves one request at a time, so an abandoned long stream that kept
    generating (1000 tokens: over 10 s here) would hold the next request back."""
    body = {
        "model": lm_server.model,
        "messages": NUMBERS,
        "temperature": 0,
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": True,
    }
    with lm_server.http() as http, http.stream("POST", "/v3/chat/completions", json=body) as reply:
        assert reply.status_code == 200
        lines = reply.iter_lines()
        assert [line for line in itertools.islice(lines, 6) if line.startswith("data:")]
    expected = golden.chat(ITALY, 30)

    started = time.monotonic()
    with lm_server.client() as client:
        response = client.with_options(timeout=8.0).chat.completions.create(
            model=lm_server.model, messages=ITALY, temperature=0, max_tokens=30
        )

    assert response.choices[0].message.content == expected.text
    assert time.monotonic() - started < 8.0


def test_logprobs_refused(lm_client: openai.OpenAI, lm_server: Server) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        lm_client.chat.completions.create(
            model=lm_server.model, messages=ITALY, max_tokens=5, logprobs=True
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["param"] == "logprobs"
    assert body["type"] == "invalid_request_error"
    assert "logprobs" in body["message"]


def test_n_above_one_refused(lm_client: openai.OpenAI, lm_server: Server) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        lm_client.chat.completions.create(
            model=lm_server.model, messages=ITALY, max_tokens=5, n=2, temperature=1.0
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == "n"


def test_still_serves_after_refusals(
    lm_client: openai.OpenAI, lm_server: Server, golden: Golden
) -> None:
    expected = golden.chat(ITALY, 30)
    response = lm_client.chat.completions.create(
        model=lm_server.model, messages=ITALY, temperature=0, max_tokens=30
    )
    assert response.choices[0].message.content == expected.text
