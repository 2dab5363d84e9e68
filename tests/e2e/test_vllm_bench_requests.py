"""What `vllm bench serve` sends, and what it reads back, against graphrt.

vLLM's benchmark client (vllm/benchmarks/lib/endpoint_request_func.py) is not installable here
(vLLM pulls torch and CUDA), so its two OpenAI request shapes are replayed as it builds them:
completions with `repetition_penalty: 1.0`, `logprobs: null`, `ignore_eos` and
`stream_options.include_usage`, prompts as text or as token ids (its random dataset); chat with
content parts and `max_completion_tokens`. It reads each SSE `data:` line, takes the first chunk
with text as the first token, and the output length from the final usage chunk; a request with no
text chunk fails ("Never received a valid chunk to calculate TTFT").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Golden, Server

MAX_TOKENS = 6


def read_like_vllm_bench(server: Server, path: str, payload: dict[str, Any]) -> tuple[str, int]:
    """The generated text and the usage's completion tokens, parsed as vllm bench parses."""
    text, output_len, first_chunk = "", 0, False
    for data in server.sse(path, payload):
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        if choices := chunk.get("choices"):
            piece = choices[0].get("text") or (choices[0].get("delta") or {}).get("content")
            if piece:
                first_chunk = True
                text += piece
        elif usage := chunk.get("usage"):
            output_len = usage.get("completion_tokens")
    assert first_chunk, "Never received a valid chunk to calculate TTFT."
    return text, output_len


@pytest.mark.parametrize("prompt_kind", ["text", "token ids"])
def test_completions_as_vllm_bench_sends_them(
    server: Server, golden: Golden, prompt_kind: str
) -> None:
    prompt = "The history of the printing press"
    payload = {
        "model": server.model,
        "prompt": prompt if prompt_kind == "text" else golden.encode(prompt, True),
        "repetition_penalty": 1.0,
        "max_tokens": MAX_TOKENS,
        "logprobs": None,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0.0,
    }
    text, output_len = read_like_vllm_bench(server, "/v1/completions", payload)
    assert output_len == MAX_TOKENS
    assert text == golden.completion(prompt, MAX_TOKENS).text


def test_chat_as_vllm_bench_sends_it(server: Server) -> None:
    payload = {
        "model": server.model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}],
        "temperature": 0.0,
        "max_completion_tokens": MAX_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "repetition_penalty": 1.0,
    }
    text, output_len = read_like_vllm_bench(server, "/v1/chat/completions", payload)
    assert output_len == MAX_TOKENS and text
