"""/metrics follows requests exactly, by OVMS's label set, on the main server (--metrics_enable).

(--metrics_list is checked in test_server_auth.py, /metrics being off by default in
test_server_default_model.py.)
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

import openai
from openai.types.chat import ChatCompletionMessageParam
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from conftest import Server

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
GENERATED = "graphrt_llm_generated_tokens_total"
PROMPT = "graphrt_llm_prompt_tokens_total"
TTFT_COUNT = "graphrt_llm_time_to_first_token_seconds_count"
QUESTIONS: list[list[ChatCompletionMessageParam]] = [
    [{"role": "user", "content": "What is the capital of Italy?"}],
    [{"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "Say hello."}],
]


SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(server: Server) -> Samples:
    """Every sample of /metrics under the exact name it is exposed with (OVMS's counters have
    no `_total`; prometheus_client's parser would add one), by its labels."""
    with server.http() as http:
        response = http.get("/metrics")
    assert response.status_code == 200, response.text
    list(text_string_to_metric_families(response.text))  # well-formed exposition
    values: Samples = {}
    for line in response.text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = frozenset(LABEL.findall(match[2] or ""))
        values[(match[1], labels)] = float(match[3])
    return values


def value(values: Samples, metric: str, /, **labels: str) -> float:
    return values.get((metric, frozenset(labels.items())), 0.0)


def request_labels(server: Server, method: str) -> dict[str, str]:
    return {"api": "V3", "interface": "REST", "method": method, "name": server.model}


def wait_for_tokens(server: Server, before: Samples, expected: float) -> Samples:
    """The token counters move when the engine request is done; poll until they have."""
    deadline = time.monotonic() + 10.0
    while True:
        after = samples(server)
        generated = value(after, GENERATED, name=server.model)
        if generated - value(before, GENERATED, name=server.model) >= expected:
            return after
        if time.monotonic() > deadline:
            return after
        time.sleep(0.05)


def test_unary_requests_move_the_counters(client: openai.OpenAI, server: Server) -> None:
    unary = request_labels(server, "Unary")
    before = samples(server)

    completion_tokens = prompt_tokens = 0
    for index, messages in enumerate(QUESTIONS):
        reply = client.chat.completions.create(
            model=server.model, messages=messages, max_tokens=4 + 3 * index
        )
        assert reply.usage is not None
        completion_tokens += reply.usage.completion_tokens
        prompt_tokens += reply.usage.prompt_tokens
    count = len(QUESTIONS)

    after = wait_for_tokens(server, before, completion_tokens)

    def delta(metric: str, /, **labels: str) -> float:
        return value(after, metric, **labels) - value(before, metric, **labels)

    assert delta("ovms_requests_success", **unary) == count
    assert delta("ovms_requests_accepted", **unary) == count
    assert delta("ovms_responses", **unary) == count  # one body each
    assert delta("ovms_requests_fail", **unary) == 0
    assert delta(GENERATED, name=server.model) == completion_tokens
    assert delta(PROMPT, name=server.model) == prompt_tokens
    assert delta(TTFT_COUNT, name=server.model) == count
    assert delta("ovms_request_time_us_count", interface="REST", name=server.model) == count
    assert value(after, "ovms_current_requests", name=server.model) == 0


def test_streamed_chunks_are_counted(server: Server) -> None:
    stream = request_labels(server, "Stream")
    before = samples(server)

    payloads = server.sse(
        "/v3/chat/completions",
        {
            "model": server.model,
            "messages": QUESTIONS[0],
            "max_tokens": 12,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert payloads[-1] == "[DONE]"
    usage = json.loads(payloads[-2])["usage"]
    assert usage["completion_tokens"] == 12

    after = wait_for_tokens(server, before, 12)

    def delta(metric: str, /, **labels: str) -> float:
        return value(after, metric, **labels) - value(before, metric, **labels)

    assert delta("ovms_requests_success", **stream) == 1
    assert delta("ovms_requests_accepted", **stream) == 1
    # Each chunk the graph sends counts: one per engine step (a step can carry several SSE
    # frames, e.g. the role frame with the first token, or the last token with usage and
    # [DONE]), so at least one per generated token here (one sequence, one token per step).
    chunks = delta("ovms_responses", **stream)
    assert usage["completion_tokens"] <= chunks <= len(payloads), (chunks, len(payloads))
    assert delta(GENERATED, name=server.model) == 12
    assert delta(TTFT_COUNT, name=server.model) == 1
    assert delta("ovms_requests_success", **request_labels(server, "Unary")) == 0
