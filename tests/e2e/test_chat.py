"""/v3/chat/completions end to end: the OpenAI SDK against `graphrt serve`, checked against the
greedy output of the same model run in this process (fixture `golden`)."""

from __future__ import annotations

import json
import math
import re
import time
from typing import TYPE_CHECKING, Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
FRENCH: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello in French."}]
LONG = 40  # max_tokens for FRENCH: long enough to hold stop strings


def _stream(client: openai.OpenAI, **kwargs: Any) -> list[ChatCompletionChunk]:
    with client.chat.completions.create(stream=True, **kwargs) as stream:
        return list(stream)


def _text(chunks: list[ChatCompletionChunk], index: int = 0) -> str:
    return "".join(
        choice.delta.content or ""
        for chunk in chunks
        for choice in chunk.choices
        if choice.index == index
    )


# ------------------------------------------------------------------------------- unary / stream


def test_unary_matches_golden(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)
    assert expected.finish_reason == "stop"  # the model answers before 30 tokens

    response = client.chat.completions.create(
        model=server.model, messages=ITALY, temperature=0, max_tokens=30
    )

    assert response.id.startswith("chatcmpl-")
    assert response.object == "chat.completion"
    assert response.model == server.model
    assert len(response.choices) == 1
    choice = response.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.message.content == expected.text
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == expected.completion_tokens
    assert response.usage.total_tokens == expected.prompt_tokens + expected.completion_tokens


def test_stream_matches_golden(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.chat(FRENCH, LONG)

    chunks = _stream(
        client,
        model=server.model,
        messages=FRENCH,
        temperature=0,
        max_tokens=LONG,
        stream_options={"include_usage": True},
    )

    ids = {chunk.id for chunk in chunks}
    assert len(ids) == 1, ids
    assert ids.pop().startswith("chatcmpl-")
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert all(chunk.model == server.model for chunk in chunks)
    *content, last = chunks
    assert content and all(len(chunk.choices) == 1 for chunk in content)
    assert content[0].choices[0].delta.role == "assistant"
    assert _text(chunks) == expected.text
    reasons = [chunk.choices[0].finish_reason for chunk in content]
    assert reasons[-1] == expected.finish_reason
    assert all(reason is None for reason in reasons[:-1]), reasons
    assert all(chunk.usage is None for chunk in content)
    # The usage chunk comes last, with no choices.
    assert last.choices == []
    assert last.usage is not None
    prompt_ids = golden.encode(golden.chat_prompt(FRENCH), add_special_tokens=False)
    assert last.usage.prompt_tokens == len(prompt_ids) == expected.prompt_tokens
    assert last.usage.completion_tokens == expected.completion_tokens
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens


@pytest.mark.parametrize("include_usage", [False, True])
def test_raw_sse_ends_with_done(server: Server, golden: Golden, include_usage: bool) -> None:
    expected = golden.chat(ITALY, 30)
    body: dict[str, Any] = {
        "model": server.model,
        "messages": ITALY,
        "temperature": 0,
        "max_tokens": 30,
        "stream": True,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}

    payloads = server.sse("/v3/chat/completions", body)

    assert payloads[-1] == "[DONE]"
    assert payloads.count("[DONE]") == 1
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    text = "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )
    assert text == expected.text
    usage = [chunk["usage"] for chunk in chunks if chunk.get("usage")]
    if include_usage:
        assert usage == [
            {
                "prompt_tokens": expected.prompt_tokens,
                "completion_tokens": expected.completion_tokens,
                "total_tokens": expected.prompt_tokens + expected.completion_tokens,
            }
        ]
        assert chunks[-1]["choices"] == []
    else:
        assert usage == []
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


# ------------------------------------------------------------------------------ finish / limits


@pytest.mark.parametrize("stream", [False, True])
def test_finish_reason_length(
    client: openai.OpenAI, server: Server, golden: Golden, stream: bool
) -> None:
    expected = golden.chat(FRENCH, 10)
    assert expected.finish_reason == "length"
    assert expected.completion_tokens == 10

    if stream:
        chunks = _stream(client, model=server.model, messages=FRENCH, temperature=0, max_tokens=10)
        text = _text(chunks)
        reason = chunks[-1].choices[0].finish_reason
    else:
        response = client.chat.completions.create(
            model=server.model, messages=FRENCH, temperature=0, max_tokens=10
        )
        text = response.choices[0].message.content or ""
        reason = response.choices[0].finish_reason
        assert response.usage is not None and response.usage.completion_tokens == 10

    assert text == expected.text
    assert reason == "length"


def test_max_completion_tokens(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    """vllm bench and newer SDKs send max_completion_tokens instead of max_tokens."""
    expected = golden.chat(FRENCH, 12)

    response = client.chat.completions.create(
        model=server.model, messages=FRENCH, temperature=0, max_completion_tokens=12
    )

    assert response.choices[0].message.content == expected.text
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None and response.usage.completion_tokens == 12


def test_content_as_list_of_text_parts(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    expected = golden.chat(ITALY, 30)
    messages: list[ChatCompletionMessageParam] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is the capital of Italy?"}],
        }
    ]

    response = client.chat.completions.create(
        model=server.model, messages=messages, temperature=0, max_tokens=30
    )

    assert response.choices[0].message.content == expected.text
    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens


# ----------------------------------------------------------------------------------------- n


def test_n2_sampling_unary(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    def ask() -> tuple[list[str], int, int]:
        response = client.chat.completions.create(
            model=server.model,
            messages=FRENCH,
            n=2,
            temperature=1.0,
            seed=1234,
            max_tokens=8,
            extra_body={"ignore_eos": True},
        )
        assert [choice.index for choice in response.choices] == [0, 1]
        assert all(choice.finish_reason == "length" for choice in response.choices)
        assert response.usage is not None
        texts = [choice.message.content or "" for choice in response.choices]
        return texts, response.usage.prompt_tokens, response.usage.completion_tokens

    texts, prompt_tokens, completion_tokens = ask()

    assert all(text.strip() for text in texts), texts
    assert prompt_tokens == golden.chat(FRENCH, 8).prompt_tokens  # the prompt counts once
    assert completion_tokens == 2 * 8  # both choices count
    # The same seed gives the same choices again.
    assert ask()[0] == texts


def test_n2_streaming(client: openai.OpenAI, server: Server) -> None:
    chunks = _stream(
        client,
        model=server.model,
        messages=FRENCH,
        n=2,
        temperature=1.0,
        seed=99,
        max_tokens=8,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )

    assert len({chunk.id for chunk in chunks}) == 1
    indexes = {choice.index for chunk in chunks for choice in chunk.choices}
    assert indexes == {0, 1}
    for index in (0, 1):
        choices = [c for chunk in chunks for c in chunk.choices if c.index == index]
        assert choices[0].delta.role == "assistant"
        assert _text(chunks, index).strip()
        assert [c.finish_reason for c in choices if c.finish_reason] == ["length"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert usage.completion_tokens == 16


# -------------------------------------------------------------------------------- stop strings


def _stop_strings(text: str, kind: str) -> list[str]:
    """Stop strings taken from the golden text (so the cut leaves something before them):
    a whole word, the inside of a word (a string that starts mid-token), or two strings of which
    the second listed occurs first.

    The golden text differs between CPUs (greedy argmax flips), and may be as repetitive as
    "Je m'appelle, je m'appelle, ...": so words are runs of letters, and the later string is any
    5 characters that first occur after the word."""
    skip = len(" ".join(text.split()[:3]))
    words = re.findall(r"[^\W\d_]{4,}", text[skip:])
    assert words, f"no usable stop words in the golden text {text!r}"
    first = words[0]
    if kind == "word":
        return [first]
    if kind == "mid-token":
        return [first[1:]]
    start = text.index(first)
    later = next(
        piece
        for piece in (text[i : i + 5] for i in range(start + len(first), len(text) - 4))
        if text.index(piece) > start and piece.strip() == piece
    )
    return [later, first]


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("include", [False, True], ids=["exclude", "include"])
@pytest.mark.parametrize("kind", ["word", "mid-token", "first-of-two"])
def test_stop_string(
    client: openai.OpenAI, server: Server, golden: Golden, stream: bool, include: bool, kind: str
) -> None:
    full = golden.chat(FRENCH, LONG).text
    stops = _stop_strings(full, kind)
    cut, stop = min((full.index(stop), stop) for stop in stops)
    expected = full[: cut + len(stop)] if include else full[:cut]
    request: dict[str, Any] = {
        "model": server.model,
        "messages": FRENCH,
        "temperature": 0,
        "max_tokens": LONG,
        "stop": stops,
        "extra_body": {"include_stop_str_in_output": include},
    }

    if stream:
        chunks = _stream(client, **request)
        text = _text(chunks)
        reason = chunks[-1].choices[0].finish_reason
        if not include:
            for chunk in chunks:
                for choice in chunk.choices:
                    assert stop not in (choice.delta.content or "")
    else:
        response = client.chat.completions.create(**request)
        text = response.choices[0].message.content or ""
        reason = response.choices[0].finish_reason

    assert text == expected, f"stop={stops!r}"
    assert reason == "stop"
    if not include:
        assert stop not in text


# ----------------------------------------------------------------------------------- logprobs


def test_logprobs_unary(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)

    response = client.chat.completions.create(
        model=server.model, messages=ITALY, temperature=0, max_tokens=30, logprobs=True
    )

    choice = response.choices[0]
    assert choice.message.content == expected.text
    assert choice.logprobs is not None and choice.logprobs.content is not None
    assert response.usage is not None
    assert len(choice.logprobs.content) == response.usage.completion_tokens
    for entry in choice.logprobs.content:
        assert math.isfinite(entry.logprob) and entry.logprob <= 0.0, entry


def test_logprobs_streaming(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)

    chunks = _stream(
        client,
        model=server.model,
        messages=ITALY,
        temperature=0,
        max_tokens=30,
        logprobs=True,
        stream_options={"include_usage": True},
    )

    entries = [
        entry
        for chunk in chunks
        for choice in chunk.choices
        if choice.logprobs is not None and choice.logprobs.content
        for entry in choice.logprobs.content
    ]
    assert _text(chunks) == expected.text
    usage = chunks[-1].usage
    assert usage is not None
    assert len(entries) == usage.completion_tokens == expected.completion_tokens
    assert all(math.isfinite(e.logprob) and e.logprob <= 0.0 for e in entries)


# ---------------------------------------------------------------------------------- API shape


def test_raw_response_shape(server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)
    with server.http() as http:
        response = http.post(
            "/v3/chat/completions",
            json={
                "model": server.model,
                "messages": ITALY,
                "temperature": 0,
                "max_tokens": 30,
            },
        )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert {"id", "object", "created", "model", "choices", "usage"} <= set(body)
    assert body["object"] == "chat.completion"
    assert body["model"] == server.model
    assert isinstance(body["created"], int) and abs(body["created"] - time.time()) < 300
    (choice,) = body["choices"]
    assert {"index", "message", "finish_reason", "logprobs"} <= set(choice)
    assert choice["message"]["content"] == expected.text
    assert body["usage"]["total_tokens"] == (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_models_endpoint(client: openai.OpenAI, server: Server) -> None:
    models = client.models.list()
    assert server.model in [model.id for model in models.data]
    assert all(model.object == "model" for model in models.data)
    assert client.models.retrieve(server.model).id == server.model


def test_v1_alias(server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)
    with server.client("/v1") as v1:
        response = v1.chat.completions.create(
            model=server.model, messages=ITALY, temperature=0, max_tokens=30
        )
        assert server.model in [model.id for model in v1.models.list().data]
    assert response.choices[0].message.content == expected.text


def test_non_ascii_stream_matches_golden(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    """Multi-byte characters split over tokens come out whole, in unary and streamed text."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Translate 'cat' to Spanish."}
    ]
    expected = golden.chat(messages, 24)
    assert not expected.text.isascii(), expected.text  # the point of this prompt

    chunks = _stream(client, model=server.model, messages=messages, temperature=0, max_tokens=24)
    response = client.chat.completions.create(
        model=server.model, messages=messages, temperature=0, max_tokens=24
    )

    assert _text(chunks) == expected.text
    assert "\ufffd" not in _text(chunks)
    assert response.choices[0].message.content == expected.text


def test_health_endpoints(server: Server) -> None:
    with server.http() as http:
        assert http.get("/v2/health/live").status_code == 200
        assert http.get("/v2/health/ready").status_code == 200
        assert http.get(f"/v2/models/{server.model}/ready").status_code == 200
        assert http.get("/v2/models/no-such-model/ready").status_code == 404


def test_multi_turn_with_system_message(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    """The server's chat template rendering matches the tokenizer's for a whole conversation."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a terse geography tutor."},
        {"role": "user", "content": "What is the capital of Italy?"},
        {"role": "assistant", "content": "Rome."},
        {"role": "user", "content": "And of Spain?"},
    ]
    expected = golden.chat(messages, 24)

    response = client.chat.completions.create(
        model=server.model, messages=messages, temperature=0, max_tokens=24
    )

    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.choices[0].message.content == expected.text
