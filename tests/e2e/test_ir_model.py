"""Serving an OpenVINO IR model directory (model + tokenizer IRs, as openvino-genai exports it
from the GGUF) gives the same greedy answers as the GGUF itself; the last test stops the server
with SIGTERM while a stream is open. The model is the tiny random llama: what is tested is the
directory's loading, which any deterministic model shows."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Launch, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
FRENCH: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello in French."}]
STREAM_TOKENS = 400  # ~1.5 s of the tiny llama here: the stream is still open at the SIGTERM


@pytest.fixture(scope="module")
def ir_server(tiny_llm_ir_dir: Path, launch: Launch) -> Iterator[Server]:
    with launch(["--model_path", str(tiny_llm_ir_dir)]) as server:
        yield server


def test_export_layout(tiny_llm_ir_dir: Path) -> None:
    names = {path.name for path in tiny_llm_ir_dir.iterdir()}
    assert {
        "openvino_model.xml",
        "openvino_model.bin",
        "openvino_tokenizer.xml",
        "openvino_detokenizer.xml",
    } <= names
    assert not any(name.endswith(".gguf") for name in names)


def test_chat_matches_golden(ir_server: Server, tiny_golden: Golden) -> None:
    expected = tiny_golden.chat(ITALY, 30)
    with ir_server.client() as client:
        response = client.chat.completions.create(
            model=ir_server.model, messages=ITALY, temperature=0, max_tokens=30
        )
    assert response.choices[0].message.content == expected.text
    assert response.choices[0].finish_reason == expected.finish_reason
    assert response.usage is not None
    assert response.usage.prompt_tokens == expected.prompt_tokens
    assert response.usage.completion_tokens == expected.completion_tokens


def test_streaming_chat_matches_golden(ir_server: Server, tiny_golden: Golden) -> None:
    expected = tiny_golden.chat(FRENCH, 24)
    with (
        ir_server.client() as client,
        client.chat.completions.create(
            model=ir_server.model, messages=FRENCH, temperature=0, max_tokens=24, stream=True
        ) as stream,
    ):
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == expected.text


def test_completion_matches_golden(ir_server: Server, tiny_golden: Golden) -> None:
    expected = tiny_golden.completion("Once upon a time", 16)
    with ir_server.client() as client:
        response = client.completions.create(
            model=ir_server.model, prompt="Once upon a time", temperature=0, max_tokens=16
        )
    assert response.choices[0].text == expected.text


def test_sigterm_lets_an_open_stream_finish(ir_server: Server) -> None:
    """Last in this module: it ends the module's server (SIGTERM, a stream open), which must let
    the stream run to its end and then exit 0 (the fixture checks the code again)."""
    body: dict[str, Any] = {
        "model": ir_server.model,
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "temperature": 0,
        "max_tokens": STREAM_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with (
        ir_server.http() as http,
        http.stream("POST", "/v3/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        first = [line for line in itertools.islice(lines, 6) if line.startswith("data:")]

        ir_server.process.send_signal(signal.SIGTERM)

        rest = [line for line in lines if line.startswith("data:")]
    assert ir_server.process.wait(30) == 0, ir_server.log()

    payloads = [line[len("data:") :].strip() for line in first + rest]
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert not any("error" in chunk for chunk in chunks), chunks
    assert chunks[-1]["usage"]["completion_tokens"] == STREAM_TOKENS
    reasons = [c["finish_reason"] for chunk in chunks for c in chunk["choices"]]
    assert reasons[-1] == "length"
