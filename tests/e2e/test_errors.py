"""Refused requests: status, OpenAI error object (type, param, a message naming the problem), and
a server that keeps working afterwards."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The `error` object of an OpenAI error response with this status."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"]
    return error


def _post(server: Server, path: str, **kwargs: Any) -> httpx.Response:
    with server.http() as http:
        return http.post(path, **kwargs)


# --------------------------------------------------------------------------------- raw bodies


def test_malformed_json(server: Server) -> None:
    response = _post(
        server,
        "/v3/chat/completions",
        content=b'{"model": "x", "messages": [',
        headers={"Content-Type": "application/json"},
    )
    error = _error(response, 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] is None
    assert "JSON" in error["message"]


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42"])
def test_body_not_an_object(server: Server, body: bytes) -> None:
    response = _post(
        server, "/v3/chat/completions", content=body, headers={"Content-Type": "application/json"}
    )
    error = _error(response, 400)
    assert error["type"] == "invalid_request_error"
    assert "object" in error["message"]


def test_empty_body(server: Server) -> None:
    error = _error(_post(server, "/v3/completions", content=b""), 400)
    assert error["type"] == "invalid_request_error"
    assert "empty" in error["message"].lower()


def test_body_over_max_request_size(server: Server, max_request_size: int) -> None:
    prompt = "x" * (max_request_size + 1024)
    response = _post(server, "/v3/completions", json={"model": server.model, "prompt": prompt})
    error = _error(response, 413)
    assert error["type"] == "invalid_request_error"
    assert str(max_request_size) in error["message"]


def test_missing_model(server: Server) -> None:
    response = _post(server, "/v3/chat/completions", json={"messages": ITALY})
    error = _error(response, 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "model"
    assert "model" in error["message"]


@pytest.mark.parametrize("path", ["/v3/chat/completion", "/v3/completionz", "/v3/embeddingz"])
def test_unknown_endpoint(server: Server, path: str) -> None:
    response = _post(server, path, json={"model": server.model, "prompt": "hi"})
    error = _error(response, 404)
    assert error["type"] == "invalid_request_error"
    assert path in error["message"]


# ------------------------------------------------------------------------- through the SDK


class Refusal:
    """An SDK call's APIStatusError, with the server's error object taken apart."""

    def __init__(self, error: openai.APIStatusError) -> None:
        body = error.body
        assert isinstance(body, dict), body
        assert {"message", "type", "param", "code"} <= set(body), body
        self.error = error
        self.message: str = body["message"]
        self.type: str | None = body["type"]
        self.param: str | None = body["param"]
        self.code: str | None = body["code"]

    def names(self, field: str) -> bool:
        return re.search(rf"\b{re.escape(field)}\b", self.message, re.IGNORECASE) is not None


def _bad_request(call: Callable[[], object], status: int = 400) -> Refusal:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    assert caught.value.status_code == status, caught.value.body
    return Refusal(caught.value)


def test_unknown_model(client: openai.OpenAI) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(model="no-such-model", messages=ITALY, max_tokens=5),
        404,
    )
    assert isinstance(error.error, openai.NotFoundError)
    assert error.type == "invalid_request_error"
    assert error.param == "model"
    assert error.code == "model_not_found"
    assert "no-such-model" in error.message


def test_unknown_model_in_models_endpoint(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_empty_messages(client: openai.OpenAI, server: Server) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(model=server.model, messages=[], max_tokens=5)
    )
    assert error.type == "invalid_request_error"
    assert error.param == "messages"
    assert error.names("messages")


@pytest.mark.parametrize("temperature", [-0.5, 2.5])
def test_temperature_out_of_range(
    client: openai.OpenAI, server: Server, temperature: float
) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(
            model=server.model, messages=ITALY, max_tokens=5, temperature=temperature
        )
    )
    assert error.type == "invalid_request_error"
    assert error.param == "temperature"
    assert error.names("temperature")


@pytest.mark.parametrize(
    ("field", "value"),
    [("n", "2"), ("max_tokens", "5"), ("stream", "yes"), ("top_p", "high"), ("seed", 1.5)],
)
def test_wrong_types(client: openai.OpenAI, server: Server, field: str, value: Any) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(
            model=server.model, messages=ITALY, extra_body={field: value}
        )
    )
    assert error.type == "invalid_request_error"
    assert error.param == field
    assert error.names(field), error.message


def test_max_tokens_over_limit(
    client: openai.OpenAI, server: Server, max_tokens_limit: int
) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(
            model=server.model, messages=ITALY, max_tokens=max_tokens_limit + 100
        )
    )
    assert error.type == "invalid_request_error"
    assert error.param == "max_tokens"
    assert error.names("max_tokens") and str(max_tokens_limit) in error.message


def test_max_completion_tokens_over_limit(
    client: openai.OpenAI, server: Server, max_tokens_limit: int
) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(
            model=server.model, messages=ITALY, max_completion_tokens=max_tokens_limit + 100
        )
    )
    assert error.param == "max_completion_tokens"
    assert error.names("max_completion_tokens")


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_prompt_too_long(client: openai.OpenAI, server: Server, endpoint: str) -> None:
    text = "hello " * 9000  # about 9000 tokens; the model's context is 8192
    if endpoint == "chat":
        error = _bad_request(
            lambda: client.chat.completions.create(
                model=server.model, messages=[{"role": "user", "content": text}], max_tokens=5
            )
        )
        assert error.param == "messages"
    else:
        error = _bad_request(
            lambda: client.completions.create(model=server.model, prompt=text, max_tokens=5)
        )
        assert error.param == "prompt"
    assert error.type == "invalid_request_error"
    assert "max length" in error.message


def test_prompt_plus_max_tokens_over_context(client: openai.OpenAI, server: Server) -> None:
    text = "hello " * 7000
    error = _bad_request(
        lambda: client.completions.create(model=server.model, prompt=text, max_tokens=1500)
    )
    assert error.param == "max_tokens"
    assert "max length" in error.message


def test_prompt_token_ids_past_the_vocabulary(client: openai.OpenAI, server: Server) -> None:
    size = 49152  # SmolLM2's vocabulary (its config: vocab_size 49152)
    error = _bad_request(
        lambda: client.completions.create(model=server.model, prompt=[1, size], max_tokens=2)
    )
    assert error.param == "prompt"
    assert f"below the vocabulary size {size}" in error.message
    # the last id inside the vocabulary is fine
    reply = client.completions.create(model=server.model, prompt=[1, size - 1], max_tokens=2)
    assert reply.choices[0].finish_reason in {"stop", "length"}


def test_image_on_text_model(client: openai.OpenAI, server: Server) -> None:
    pixel = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    messages: list[ChatCompletionMessageParam] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image_url", "image_url": {"url": pixel}},
            ],
        }
    ]
    error = _bad_request(
        lambda: client.chat.completions.create(model=server.model, messages=messages, max_tokens=5)
    )
    assert error.type == "invalid_request_error"
    assert error.param == "messages"
    assert error.message == (
        "This servable supports only text input, but image_url has been provided"
    )


def test_stream_options_without_stream(client: openai.OpenAI, server: Server) -> None:
    error = _bad_request(
        lambda: client.chat.completions.create(
            model=server.model,
            messages=ITALY,
            max_tokens=5,
            stream_options={"include_usage": True},
        )
    )
    assert error.param == "stream_options"
    assert error.names("stream_options")


# ----------------------------------------------------------------------------- still healthy


def test_server_still_works_after_errors(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    expected = golden.chat(ITALY, 30)
    with server.http() as http:
        assert http.get("/v2/health/ready").status_code == 200
    response = client.chat.completions.create(
        model=server.model, messages=ITALY, temperature=0, max_tokens=30
    )
    assert response.choices[0].message.content == expected.text
    with client.chat.completions.create(
        model=server.model, messages=ITALY, temperature=0, max_tokens=30, stream=True
    ) as stream:
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == expected.text


@pytest.mark.parametrize(
    ("request_fields", "status", "param"),
    [
        ({"temperature": 5.0}, 400, "temperature"),
        ({"messages": [{"role": "user", "content": "hello " * 9000}]}, 400, "messages"),
        ({"model": "no-such-model"}, 404, "model"),
    ],
    ids=["temperature", "too-long", "unknown-model"],
)
def test_streaming_request_refused_before_streaming(
    server: Server, request_fields: dict[str, Any], status: int, param: str
) -> None:
    """A streaming request refused before its first chunk gets a plain JSON error and status,
    not a 200 event stream."""
    body: dict[str, Any] = {
        "model": server.model,
        "messages": ITALY,
        "max_tokens": 5,
        "stream": True,
        **request_fields,
    }
    error = _error(_post(server, "/v3/chat/completions", json=body), status)
    assert error["param"] == param
