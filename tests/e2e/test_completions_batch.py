"""/v3/completions with several prompts, as vLLM's benchmark and lm-eval-harness send them.

Each prompt's choice must be the greedy output of the same model run directly (`golden`), in
OpenAI's order (index = prompt * n + i), with usage summed, unary and streamed, for prompts as
strings and as token-id lists.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

if TYPE_CHECKING:
    from conftest import Golden, Server

PROMPTS = ["Once upon a time", "The capital of France is", "1, 2, 3, 4,"]
MAX_TOKENS = 12


def test_string_prompts_each_match_golden_in_order(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    expected = [golden.completion(prompt, MAX_TOKENS) for prompt in PROMPTS]
    response = client.completions.create(
        model=server.model, prompt=PROMPTS, temperature=0, max_tokens=MAX_TOKENS
    )
    assert [choice.index for choice in response.choices] == [0, 1, 2]
    assert [choice.text for choice in response.choices] == [e.text for e in expected]
    assert [c.finish_reason for c in response.choices] == [e.finish_reason for e in expected]
    assert response.usage is not None
    assert response.usage.prompt_tokens == sum(e.prompt_tokens for e in expected)
    assert response.usage.completion_tokens == sum(e.completion_tokens for e in expected)
    assert response.usage.total_tokens == response.usage.prompt_tokens + sum(
        e.completion_tokens for e in expected
    )


def test_token_id_prompts_answer_as_their_text(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    ids = [golden.encode(prompt, True) for prompt in PROMPTS[:2]]
    expected = [golden.completion(prompt, MAX_TOKENS) for prompt in PROMPTS[:2]]
    response = client.completions.create(
        model=server.model, prompt=ids, temperature=0, max_tokens=MAX_TOKENS
    )
    assert [choice.text for choice in response.choices] == [e.text for e in expected]
    assert response.usage is not None
    assert response.usage.prompt_tokens == sum(len(i) for i in ids)


def test_stream_interleaves_prompts_with_their_indices(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    expected = [golden.completion(prompt, MAX_TOKENS) for prompt in PROMPTS]
    with client.completions.create(
        model=server.model,
        prompt=PROMPTS,
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)
    assert len({chunk.id for chunk in chunks}) == 1
    *content, last = chunks
    texts: dict[int, str] = defaultdict(str)
    reasons: dict[int, str | None] = {}
    for chunk in content:
        (choice,) = chunk.choices
        texts[choice.index] += choice.text
        if choice.finish_reason is not None:
            reasons[choice.index] = choice.finish_reason
    assert [texts[i] for i in range(3)] == [e.text for e in expected]
    assert [reasons[i] for i in range(3)] == [e.finish_reason for e in expected]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == sum(e.completion_tokens for e in expected)
    assert last.usage.prompt_tokens == sum(e.prompt_tokens for e in expected)


def test_raw_stream_has_one_done_at_the_end(server: Server) -> None:
    frames = server.sse(
        "/v3/completions",
        {"model": server.model, "prompt": PROMPTS[:2], "max_tokens": 4, "stream": True},
    )
    assert frames[-1] == "[DONE]" and frames.count("[DONE]") == 1


def test_n_choices_per_prompt_are_indexed_prompt_major(
    client: openai.OpenAI, server: Server
) -> None:
    response = client.completions.create(
        model=server.model,
        prompt=PROMPTS[:2],
        n=2,
        temperature=1.0,
        seed=7,
        max_tokens=4,
    )
    assert sorted(choice.index for choice in response.choices) == [0, 1, 2, 3]


def test_echo_puts_each_prompt_before_its_choice(
    client: openai.OpenAI, server: Server, golden: Golden
) -> None:
    expected = [golden.completion(prompt, 6) for prompt in PROMPTS[:2]]
    response = client.completions.create(
        model=server.model, prompt=PROMPTS[:2], echo=True, temperature=0, max_tokens=6
    )
    assert [choice.text for choice in response.choices] == [
        prompt + e.text for prompt, e in zip(PROMPTS[:2], expected, strict=True)
    ]


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        (["fine", ""], "prompt[1] is empty"),
        (["fine", [1, "x"]], "prompt[1] must be a string or a non-empty list of token ids"),
        ([[1, 2], [-1]], "prompt[1] token ids must be between 0 and 2147483647"),
    ],
)
def test_a_bad_prompt_in_the_list_is_a_400_before_anything_runs(
    server: Server, prompt: list[Any], message: str
) -> None:
    reply = httpx.post(
        f"{server.base_url}/v3/completions",
        json={"model": server.model, "prompt": prompt, "max_tokens": 4},
        timeout=30,
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == message
    assert reply.json()["error"]["param"] == "prompt"


def test_a_prompt_the_graph_refuses_fails_the_whole_stream_with_its_400(server: Server) -> None:
    """max_tokens above the limit refuses every prompt; nothing is streamed before the 400."""
    reply = httpx.post(
        f"{server.base_url}/v3/completions",
        json={
            "model": server.model,
            "prompt": PROMPTS[:2],
            "max_tokens": 10**6,
            "stream": True,
        },
        timeout=30,
    )
    assert reply.status_code == 400
    assert "max_tokens" in reply.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_the_engine_refuses_fails_the_request_with_a_400(
    server: Server, stream: bool
) -> None:
    """A token id outside the vocabulary: the graph refuses that prompt while the other runs."""
    reply = httpx.post(
        f"{server.base_url}/v3/completions",
        json={
            "model": server.model,
            "prompt": [[10**6], [2695, 329]],
            "max_tokens": 4,
            "echo": True,
            "stream": stream,
        },
        timeout=30,
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
