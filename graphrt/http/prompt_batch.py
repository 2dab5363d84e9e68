"""Completions with several prompts, as OpenAI and vLLM take them: one graph run per prompt.

`prompt` may be a list of strings or a list of token-id lists (what `vllm bench`, lm-eval-harness
and batch clients send). Each prompt becomes a request of its own, run concurrently through the
same graph, so the engine batches them like separate clients; the answers are joined into one
response as OpenAI joins them: choice `index = prompt * n + i`, usage summed, one `id`. A stream
interleaves the prompts' chunks as they come, each re-indexed, with one usage chunk (the sum)
and one `[DONE]` at the end. No byte is sent until every prompt has produced its first chunk, so
a prompt the graph refuses fails the whole request with its 400, as a single prompt would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from calculators.http.replies import (
    DONE,
    JsonReply,
    Reply,
    SseEvent,
    SseEvents,
    StreamStep,
    events_of,
    json_of,
)
from servables.errors import InvalidRequest
from servables.io.request_fields import is_integer, is_number
from servables.openai.messages import token_ids

Replies = AsyncGenerator[Reply, None]


def split_prompts(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """One request body per prompt when `prompt` lists several; None for a single prompt
    (a string, one token-id list, or a list of one), which the graph takes as it is."""
    prompt = body.get("prompt")
    if not isinstance(prompt, list) or len(prompt) < 2:
        return None
    if not all(isinstance(p, str | list) for p in prompt):
        return None  # token ids, or a mix the graph refuses in its own words
    for index, item in enumerate(prompt):
        if isinstance(item, str) and not item:
            raise InvalidRequest(f"prompt[{index}] is empty", param="prompt")
        if isinstance(item, list) and token_ids(item, f"prompt[{index}]") is None:
            raise InvalidRequest(
                f"prompt[{index}] must be a string or a non-empty list of token ids",
                param="prompt",
            )
    return [{**body, "prompt": item} for item in prompt]


def choices_per_prompt(body: dict[str, Any]) -> int:
    n = body.get("n", 1)
    return n if is_integer(n) and n > 0 else 1


def _add_usage(total: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """Sums usage objects field by field, details included."""
    for key, value in usage.items():
        if isinstance(value, dict):
            total[key] = _add_usage(dict(total.get(key) or {}), value)
        elif is_number(value):
            total[key] = total.get(key, 0) + value
        else:
            total.setdefault(key, value)
    return total


def _reindexed(body: dict[str, Any], prompt: int, n: int, shared_id: str) -> dict[str, Any]:
    choices = [{**c, "index": prompt * n + c.get("index", 0)} for c in body.get("choices", [])]
    return {**body, "id": shared_id, "choices": choices}


async def joined_unary(runs: Sequence[Replies], n: int) -> AsyncGenerator[JsonReply, None]:
    """The prompts' JSON bodies, gathered concurrently, as one body."""
    tasks = [asyncio.create_task(_only_body(run)) for run in runs]
    try:
        bodies = await asyncio.gather(*tasks)
    finally:
        await _stop(tasks, runs)
    first = bodies[0]
    joined = {**first, "choices": [], "usage": {}}
    for prompt, body in enumerate(bodies):
        joined["choices"] += _reindexed(body, prompt, n, first["id"])["choices"]
        joined["usage"] = _add_usage(joined["usage"], body.get("usage") or {})
    yield JsonReply(joined)


async def _only_body(run: Replies) -> dict[str, Any]:
    body: Any = None
    async for reply in run:
        body = body if body is not None else json_of(reply)
    if not isinstance(body, dict):
        raise InvalidRequest("a prompt's answer is not a JSON object")
    return body


async def joined_stream(runs: Sequence[Replies], n: int) -> AsyncGenerator[SseEvents, None]:
    """The prompts' stream steps, interleaved as they come and re-indexed; see the module
    docstring."""
    queue: asyncio.Queue[tuple[int, Reply | BaseException | None]] = asyncio.Queue()

    async def pump(prompt: int, run: Replies) -> None:
        try:
            async for reply in run:
                await queue.put((prompt, reply))
            await queue.put((prompt, None))
        except Exception as error:  # the prompt's failure, surfaced in the joined stream
            await queue.put((prompt, error))

    tasks = [asyncio.create_task(pump(i, run)) for i, run in enumerate(runs)]
    try:
        held: list[tuple[int, Reply]] = []
        started: set[int] = set()
        finished = 0
        while len(started) < len(runs):  # every prompt's first step (or failure) first
            prompt, item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            if item is None:
                finished += 1
                started.add(prompt)
                continue
            started.add(prompt)
            held.append((prompt, item))
        joiner = _StreamJoiner(n)
        for prompt, item in held:
            if joined := joiner.step(prompt, _step(item)):
                yield joined
        while finished < len(runs):
            prompt, item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            if item is None:
                finished += 1
                continue
            if joined := joiner.step(prompt, _step(item)):
                yield joined
        yield joiner.end()
    finally:
        await _stop(tasks, runs)


def _step(reply: Reply) -> StreamStep:
    if isinstance(reply, SseEvents | bytes):
        return reply
    raise InvalidRequest("a prompt's graph answered a streaming request with a whole body")


async def _stop(tasks: Sequence[asyncio.Task[Any]], runs: Sequence[Replies]) -> None:
    """Cancel the prompts still running (one failed, or the client left), then close them."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for run in runs:
        await run.aclose()


class _StreamJoiner:
    """Rewrites each prompt's events into the joined stream's."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.id: str | None = None
        self.usage: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None

    def step(self, prompt: int, step: StreamStep) -> SseEvents:
        out: list[SseEvent] = []
        for event in events_of(step).events:
            body = event.data
            if event.done:
                continue  # one [DONE], at the end
            if not isinstance(body, dict) or "choices" not in body:  # an error: passed on
                out.append(event)
                continue
            self.id = self.id or body["id"]
            if not body["choices"] and body.get("usage"):  # a prompt's usage chunk: summed
                self.usage = _add_usage(self.usage or {}, body["usage"])
                self.last = body
                continue
            assert self.id is not None
            out.append(SseEvent(_reindexed(body, prompt, self.n, self.id)))
        return SseEvents(tuple(out))

    def end(self) -> SseEvents:
        if self.usage is None or self.last is None:
            return SseEvents((DONE,))
        usage = {**self.last, "id": self.id, "usage": self.usage}
        return SseEvents((SseEvent(usage), DONE))


def joined(
    bodies: Sequence[dict[str, Any]], run: Callable[[dict[str, Any]], Replies], streaming: bool
) -> AsyncGenerator[Reply, None]:
    """The response of one request per body (`run` starts one), joined; see the module
    docstring."""
    n = choices_per_prompt(bodies[0])
    runs = [run(body) for body in bodies]
    return joined_stream(runs, n) if streaming else joined_unary(runs, n)
