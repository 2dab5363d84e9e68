"""/v3/completions end to end: a raw prompt (no chat template), checked against the greedy output
of the same model run in this process (fixture `golden`)."""

from __future__ import annotations

import json
import math
import threading
from typing import TYPE_CHECKING, Any

import openai
import pytest
from openai.types import Completion

if TYPE_CHECKING:
    from conftest import Golden, Server

PROMPT = "Once upon a time"
MAX_TOKENS = 16


def _stream(client: openai.OpenAI, **kwargs: Any) -> list[Completion]:
    with client.completions.create(stream=True, **kwargs) as stream:
        return list(stream)


def test_unary_matches_golden(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)

    response = client.completions.create(
        model=server.model, prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS
    )

    assert response.id.startswith("cmpl-")
    assert response.object == "text_completion"
    assert response.model == server.model
    (choice,) = response.choices
    assert choice.index == 0
    assert choice.text == expected.text
    assert choice.finish_reason == expected.finish_reason
    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == expected.completion_tokens
    assert response.usage.total_tokens == expected.prompt_tokens + expected.completion_tokens


def test_stream_matches_golden(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)

    chunks = _stream(
        client,
        model=server.model,
        prompt=PROMPT,
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream_options={"include_usage": True},
    )

    ids = {chunk.id for chunk in chunks}
    assert len(ids) == 1 and ids.pop().startswith("cmpl-")
    *content, last = chunks
    assert "".join(chunk.choices[0].text for chunk in content) == expected.text
    reasons = [chunk.choices[0].finish_reason for chunk in content]
    assert reasons[-1] == expected.finish_reason
    assert all(reason is None for reason in reasons[:-1])
    assert last.choices == [] and last.usage is not None
    assert last.usage.prompt_tokens == expected.prompt_tokens
    assert last.usage.completion_tokens == expected.completion_tokens


def test_raw_sse_ends_with_done(server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)
    payloads = server.sse(
        "/v3/completions",
        {
            "model": server.model,
            "prompt": PROMPT,
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
            "stream": True,
        },
    )

    assert payloads[-1] == "[DONE]" and payloads.count("[DONE]") == 1
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks) == expected.text
    assert all(chunk["object"] == "text_completion" for chunk in chunks)


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_echo_prepends_prompt(
    client: openai.OpenAI, server: Server, golden: Golden, stream: bool
) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)
    request: dict[str, Any] = {
        "model": server.model,
        "prompt": PROMPT,
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
        "echo": True,
    }

    if stream:
        text = "".join(c.choices[0].text for c in _stream(client, **request) if c.choices)
    else:
        response = client.completions.create(**request)
        text = response.choices[0].text
        assert response.usage is not None
        assert response.usage.completion_tokens == expected.completion_tokens

    assert text == PROMPT + expected.text


def test_prompt_as_token_ids(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)
    ids = golden.encode(PROMPT, add_special_tokens=True)

    response = client.completions.create(
        model=server.model, prompt=ids, temperature=0, max_tokens=MAX_TOKENS
    )

    assert response.choices[0].text == expected.text
    assert response.usage is not None and response.usage.prompt_tokens == len(ids)


def test_logprobs(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)

    response = client.completions.create(
        model=server.model, prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS, logprobs=1
    )

    choice = response.choices[0]
    assert choice.text == expected.text
    logprobs = choice.logprobs
    assert logprobs is not None
    assert logprobs.tokens is not None
    assert logprobs.token_logprobs is not None
    assert logprobs.text_offset is not None
    lengths = {len(logprobs.tokens), len(logprobs.token_logprobs), len(logprobs.text_offset)}
    assert lengths == {expected.completion_tokens}
    assert all(math.isfinite(value) and value <= 0.0 for value in logprobs.token_logprobs)
    assert logprobs.text_offset[0] == 0
    assert logprobs.text_offset == sorted(logprobs.text_offset)


def test_finish_reason_stop_on_eos(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    """A prompt the model ends by itself (EOS) well before max_tokens."""
    prompt = golden.chat_prompt([{"role": "user", "content": "What is the capital of Italy?"}])
    expected = golden.completion(prompt, 30)
    assert expected.finish_reason == "stop"

    response = client.completions.create(
        model=server.model, prompt=prompt, temperature=0, max_tokens=30
    )

    assert response.choices[0].text == expected.text
    assert response.choices[0].finish_reason == "stop"


def test_v1_alias(server: Server, golden: Golden) -> None:
    expected = golden.completion(PROMPT, MAX_TOKENS)
    with server.client("/v1") as v1:
        response = v1.completions.create(
            model=server.model, prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS
        )
    assert response.choices[0].text == expected.text


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_echo_with_zero_max_tokens_returns_the_prompt_once(
    client: openai.OpenAI, server: Server, stream: bool
) -> None:
    """echo with max_tokens 0 is how clients score a prompt: the text is the prompt, once."""
    request: dict[str, Any] = {
        "model": server.model,
        "prompt": PROMPT,
        "max_tokens": 0,
        "echo": True,
    }
    if stream:
        text = "".join(c.choices[0].text for c in _stream(client, **request) if c.choices)
    else:
        text = client.completions.create(**request).choices[0].text
    assert text == PROMPT


def test_echo_with_token_id_prompt(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    """echo repeats the prompt's text also when the prompt was given as token ids."""
    expected = golden.completion(PROMPT, MAX_TOKENS)
    ids = golden.encode(PROMPT, add_special_tokens=True)

    response = client.completions.create(
        model=server.model, prompt=ids, temperature=0, max_tokens=MAX_TOKENS, echo=True
    )

    assert response.choices[0].text == PROMPT + expected.text


@pytest.mark.parametrize("max_tokens", [0, 3])
def test_echo_with_logprobs_scores_the_prompt_as_the_engine_does(
    client: openai.OpenAI, server: Server, golden: Golden, max_tokens: int
) -> None:
    """echo + logprobs is how lm-eval-harness scores text (loglikelihood): every prompt token
    after the first gets the engine's logprob; the first is null, as in OpenAI's API and vLLM."""
    prompts = [PROMPT, "The capital of France is Paris"]
    response = client.completions.create(
        model=server.model,
        prompt=prompts,
        temperature=0,
        max_tokens=max_tokens,
        echo=True,
        logprobs=0,
    )
    for choice, prompt in zip(response.choices, prompts, strict=True):
        logprobs = choice.logprobs
        assert logprobs is not None and logprobs.token_logprobs is not None
        assert logprobs.tokens is not None and logprobs.top_logprobs is not None
        prompt_count = len(golden.encode(prompt, True))
        assert len(logprobs.tokens) == prompt_count + max_tokens
        assert "".join(logprobs.tokens[:prompt_count]) == prompt
        assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
        expected = golden.prompt_logprobs(prompt)
        assert logprobs.token_logprobs[1:prompt_count] == pytest.approx(expected, abs=1e-4)
        assert choice.finish_reason == "length"
    assert response.usage is not None and response.usage.completion_tokens == 2 * max_tokens


def test_a_prompt_scored_while_another_request_generates_gets_its_own_scores(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    """genai 2026.4 misplaces an echoing request's prompt logprobs when other requests share
    its prefill step, so the engine runs a scoring request's prefill on its own: the scores
    equal the engine's alone even while another request is generating."""
    first_chunk = threading.Event()
    texts: list[str] = []

    def generate() -> None:
        for chunk in client.completions.create(
            model=server.model,
            prompt="Write a long story about a lighthouse keeper.",
            max_tokens=200,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        ):
            texts.append(chunk.choices[0].text if chunk.choices else "")
            first_chunk.set()

    runner = threading.Thread(target=generate)
    runner.start()
    try:
        assert first_chunk.wait(60)
        prompt = "The capital of France is Paris"
        response = client.completions.create(
            model=server.model, prompt=prompt, max_tokens=0, echo=True, logprobs=0
        )
    finally:
        runner.join(120)
    logprobs = response.choices[0].logprobs
    assert logprobs is not None and logprobs.token_logprobs is not None
    expected = golden.prompt_logprobs(prompt)
    assert logprobs.token_logprobs[1:] == pytest.approx(expected, abs=1e-4)
    assert len(texts) > 100  # the other request went on


def test_echo_logprobs_offsets_point_into_the_echoed_text(
    client: openai.OpenAI, server: Server
) -> None:
    """text_offset indexes the returned text, which starts with the echoed prompt; streamed
    chunks must give the same offsets as the unary response."""
    request: dict[str, Any] = {
        "model": server.model,
        "prompt": PROMPT,
        "temperature": 0,
        "max_tokens": 4,
        "echo": True,
        "logprobs": 1,
    }
    unary = client.completions.create(**request).choices[0]
    chunks = _stream(client, **request)

    assert unary.logprobs is not None and unary.logprobs.text_offset is not None
    assert unary.logprobs.tokens is not None
    for token, offset in zip(unary.logprobs.tokens, unary.logprobs.text_offset, strict=True):
        assert unary.text[offset : offset + len(token)] == token
    assert unary.logprobs.text_offset[0] == 0  # the prompt's tokens are scored too
    streamed = [
        offset
        for chunk in chunks
        for choice in chunk.choices
        if choice.logprobs is not None and choice.logprobs.text_offset
        for offset in choice.logprobs.text_offset
    ]
    assert streamed == unary.logprobs.text_offset
