"""Many concurrent streams through one continuous-batching engine: every stream gets exactly its
own greedy answer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Server

PROMPTS: list[list[ChatCompletionMessageParam]] = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a short poem about the sea."}],
    [{"role": "user", "content": "Name three primary colors and explain each one."}],
]
STREAMS = 16
MAX_TOKENS = 32


async def test_concurrent_streams_match_golden(server: Server, golden: Golden) -> None:
    expected = [golden.chat(messages, MAX_TOKENS) for messages in PROMPTS]

    async with server.async_client() as client:

        async def one(number: int) -> tuple[set[str], str, str | None]:
            stream = await client.chat.completions.create(
                model=server.model,
                messages=PROMPTS[number % len(PROMPTS)],
                temperature=0,
                max_tokens=MAX_TOKENS,
                stream=True,
            )
            ids: set[str] = set()
            parts: list[str] = []
            reason = None
            async with stream:
                async for chunk in stream:
                    ids.add(chunk.id)
                    for choice in chunk.choices:
                        parts.append(choice.delta.content or "")
                        reason = choice.finish_reason or reason
            return ids, "".join(parts), reason

        results = await asyncio.gather(*(one(number) for number in range(STREAMS)))

    for number, (ids, text, reason) in enumerate(results):
        want = expected[number % len(PROMPTS)]
        assert len(ids) == 1, ids
        assert text == want.text, f"stream {number}"
        assert reason == want.finish_reason, f"stream {number}"
    all_ids = {next(iter(ids)) for ids, _, _ in results}
    assert len(all_ids) == STREAMS
