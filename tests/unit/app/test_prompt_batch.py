"""prompt_batch: splitting a completions request by prompt and joining the answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from calculators.http.replies import Reply, encode, parse_events
from graphrt.http.prompt_batch import joined, split_prompts
from servables.errors import InvalidRequest


def test_only_a_list_of_several_prompts_is_split() -> None:
    assert split_prompts({"prompt": "one"}) is None
    assert split_prompts({"prompt": [1, 2, 3]}) is None  # token ids of one prompt
    assert split_prompts({"prompt": ["only"]}) is None
    assert split_prompts({"prompt": ["a", [5, 6]], "n": 2}) == [
        {"prompt": "a", "n": 2},
        {"prompt": [5, 6], "n": 2},
    ]
    with pytest.raises(InvalidRequest, match=r"prompt\[0\] is empty"):
        split_prompts({"prompt": ["", "b"]})


def frame(body: Any) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def chunk(prompt_id: str, index: int, text: str, reason: str | None = None) -> bytes:
    choice = {"index": index, "text": text, "logprobs": None, "finish_reason": reason}
    return frame({"id": prompt_id, "object": "text_completion", "choices": [choice]})


def usage(prompt_id: str, prompt: int, completion: int) -> bytes:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return frame({"id": prompt_id, "choices": [], "usage": counts})


async def collect(generator: AsyncGenerator[Reply, None]) -> list[bytes]:
    """What the route would send, frame by frame (a unary body is one)."""
    sent = [encode(item) async for item in generator]
    return [f + b"\n\n" if b"data:" in f else f for r in sent for f in r.split(b"\n\n") if f]


def runner(answers: dict[str, list[Any]], delays: dict[str, float] | None = None) -> Any:
    async def run(body: dict[str, Any]) -> AsyncGenerator[bytes, None]:
        for item in answers[body["prompt"]]:
            await asyncio.sleep((delays or {}).get(body["prompt"], 0))
            yield item

    return run


@pytest.mark.parametrize("typed", [False, True], ids=["bytes", "typed"])
async def test_stream_reindexes_interleaves_and_sums_usage(typed: bool) -> None:
    answers = {
        "a": [
            chunk("A", 0, "x"),
            chunk("A", 1, "y", "stop"),
            usage("A", 3, 2),
            b"data: [DONE]\n\n",
        ],
        "b": [
            chunk("B", 0, "z"),
            chunk("B", 1, "w", "length"),
            usage("B", 4, 5),
            b"data: [DONE]\n\n",
        ],
    }
    if typed:  # as HttpLLMCalculator sends them; bytes as a graph written for OVMS does
        answers = {k: [parse_events(frames) for frames in v] for k, v in answers.items()}
    bodies = [{"prompt": "a", "n": 2}, {"prompt": "b", "n": 2}]
    frames = await collect(joined(bodies, runner(answers, {"a": 0.01}), streaming=True))
    data = [json.loads(f.removeprefix(b"data: ")) for f in frames[:-1]]
    assert frames[-1] == b"data: [DONE]\n\n"
    assert {d["id"] for d in data} == {data[0]["id"]}
    texts = {d["choices"][0]["index"]: d["choices"][0]["text"] for d in data if d["choices"]}
    assert texts == {0: "x", 1: "y", 2: "z", 3: "w"}
    assert data[-1]["choices"] == [] and data[-1]["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 7,
    }


async def test_unary_joins_choices_in_prompt_order() -> None:
    def body(prompt_id: str, text: str, tokens: int) -> bytes:
        return json.dumps(
            {
                "id": prompt_id,
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": tokens,
                    "completion_tokens": 1,
                    "total_tokens": tokens + 1,
                },
            }
        ).encode()

    answers = {"a": [body("A", "x", 2)], "b": [body("B", "y", 3)]}
    bodies = [{"prompt": "a"}, {"prompt": "b"}]
    (result,) = await collect(joined(bodies, runner(answers, {"a": 0.02}), streaming=False))
    parsed = json.loads(result)
    assert parsed["id"] == "A"
    assert [(c["index"], c["text"]) for c in parsed["choices"]] == [(0, "x"), (1, "y")]
    assert parsed["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


async def test_a_failure_before_the_first_chunk_is_raised_before_anything_is_sent() -> None:
    async def run(body: dict[str, Any]) -> AsyncGenerator[bytes, None]:
        if body["prompt"] == "bad":
            raise InvalidRequest("refused", param="max_tokens")
        await asyncio.sleep(0)
        yield chunk("A", 0, "x")

    stream = joined([{"prompt": "a"}, {"prompt": "bad"}], run, streaming=True)
    with pytest.raises(InvalidRequest, match="refused"):
        await stream.__anext__()


async def test_a_failing_prompt_fails_a_unary_request_while_others_still_run() -> None:
    """The others are cancelled and closed; the request fails with the prompt's own error."""
    closed: list[str] = []

    async def run(body: dict[str, Any]) -> AsyncGenerator[bytes, None]:
        try:
            if body["prompt"] == "bad":
                raise InvalidRequest("refused", param="max_tokens")
            await asyncio.sleep(5)
            yield b"{}"
        finally:
            closed.append(body["prompt"])

    unary = joined([{"prompt": "slow"}, {"prompt": "bad"}], run, streaming=False)
    with pytest.raises(InvalidRequest, match="refused"):
        await unary.__anext__()
    assert sorted(closed) == ["bad", "slow"]
