"""/metrics end to end: counters follow requests, and a client that goes away (mid-stream, or
while waiting for a unary answer) frees the engine (its request and KV cache) at once instead of
generating to max_tokens."""

from __future__ import annotations

import itertools
import json
import re
import socket
import time
from typing import TYPE_CHECKING

import openai
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
STORY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Tell me a very long story about a dragon."}
]
ACTIVE = "graphrt_llm_requests_active"
KV_USAGE = "graphrt_llm_kv_cache_usage_ratio"
GENERATED = "graphrt_llm_generated_tokens_total"
PROMPT_TOKENS = "graphrt_llm_prompt_tokens_total"


def _counter(values: dict[str, float], name: str) -> float:
    """An ovms_* counter by its OVMS name (whatever suffix the exposition gives it)."""
    return values.get(name, values.get(f"{name}_total", 0.0))


def _wait_idle(
    server: Server, generated_above: float = -1.0, timeout: float = 10.0
) -> dict[str, float]:
    """Poll /metrics until no request is active in the engine or the HTTP layer (whose cleanup
    may trail the engine's abort by a moment), the KV cache is empty and the generated-token
    counter is above `generated_above`; the last sample."""
    deadline = time.monotonic() + timeout
    while True:
        values = server.metrics()
        idle = values.get(ACTIVE) == 0 and values.get(KV_USAGE) == 0
        idle = idle and values.get("ovms_current_requests", 0.0) == 0
        if idle and values.get(GENERATED, 0.0) > generated_above:
            return values
        if time.monotonic() > deadline:
            raise AssertionError(f"engine not idle after {timeout} s: {values}")
        time.sleep(0.05)


def test_counters_follow_a_request(client: openai.OpenAI, server: Server, golden: Golden) -> None:
    expected = golden.chat(ITALY, 30)
    before = server.metrics()

    client.chat.completions.create(model=server.model, messages=ITALY, temperature=0, max_tokens=30)

    after = _wait_idle(server, before.get(GENERATED, 0.0))
    assert after[GENERATED] - before.get(GENERATED, 0.0) == expected.completion_tokens
    assert after[PROMPT_TOKENS] - before.get(PROMPT_TOKENS, 0.0) == expected.prompt_tokens
    for name in ("ovms_requests_accepted", "ovms_requests_success", "ovms_responses"):
        assert _counter(after, name) - _counter(before, name) == 1, name
    assert _counter(after, "ovms_requests_fail") == _counter(before, "ovms_requests_fail")
    assert after["ovms_current_requests"] == 0
    assert after["graphrt_llm_time_to_first_token_seconds_count"] >= 1


def test_ovms_metric_names_are_kept(client: openai.OpenAI, server: Server) -> None:
    """OVMS exposes its counters as `ovms_requests_success{...}`, without a `_total` suffix;
    dashboards and alerts written for OVMS query those names."""
    client.chat.completions.create(model=server.model, messages=ITALY, max_tokens=2)
    with server.http() as http:
        text = http.get("/metrics").text
    for name in ("ovms_requests_accepted", "ovms_requests_success", "ovms_responses"):
        assert re.search(rf"^{name}\{{", text, re.MULTILINE), (
            f"{name} is not exposed under its OVMS name; found: "
            + ", ".join(sorted(set(re.findall(rf"^({name}\w*)\{{", text, re.MULTILINE))))
        )


def test_disconnect_mid_stream_frees_the_engine(server: Server) -> None:
    before = _wait_idle(server)
    body = {
        "model": server.model,
        "messages": STORY,
        "temperature": 0,
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": True,
    }

    with server.http() as http, http.stream("POST", "/v3/chat/completions", json=body) as response:
        assert response.status_code == 200
        # Keep the line iterator referenced: dropping it would close the connection early.
        lines = response.iter_lines()
        frames = [line for line in itertools.islice(lines, 10) if line.startswith("data:")]
        assert len(frames) == 5 and '"error"' not in "".join(frames), frames
        during = server.metrics()
        assert during[ACTIVE] == 1
        assert during[KV_USAGE] > 0
    # Leaving the block closed the connection with the body unread.

    after = _wait_idle(server, before.get(GENERATED, 0.0))
    generated = after[GENERATED] - before.get(GENERATED, 0.0)
    assert generated < 200, f"{generated} tokens generated for the abandoned request"
    assert after["ovms_current_requests"] == 0
    # Nothing is left running: the counter stays put.
    time.sleep(0.3)
    assert server.metrics()[GENERATED] == after[GENERATED]


def test_unary_client_gone_frees_the_engine(server: Server) -> None:
    """A unary request whose client stops waiting (read timeout: the connection is closed)."""
    before = _wait_idle(server)
    body = {
        "model": server.model,
        "messages": STORY,
        "temperature": 0,
        "max_tokens": 1000,
        "ignore_eos": True,
    }

    # The client goes away once the engine holds its prompt in the KV cache (seen in /metrics),
    # however long that takes on a busy machine: a read timeout of its own would race that.
    payload = json.dumps(body).encode()
    head = (
        "POST /v3/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        connection.sendall(head.encode() + payload)
        deadline = time.monotonic() + 60
        while not server.metrics().get(KV_USAGE):
            assert time.monotonic() < deadline, "the request never reached the engine"
            time.sleep(0.05)

    # 1000 tokens take over 10 s on this machine; the abort must come long before.
    after = _wait_idle(server, before.get(GENERATED, 0.0))
    generated = after[GENERATED] - before.get(GENERATED, 0.0)
    assert generated < 500, f"{generated} tokens generated for the abandoned request"
    assert after["ovms_current_requests"] == 0
