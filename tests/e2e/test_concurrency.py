"""Many concurrent streams through one continuous-batching engine: every stream gets exactly its
own greedy answer.

OpenVINO's CPU kernels are not batch-invariant: the same prompt decoded alone and inside a batch
of 16 can pick different greedy tokens where two candidates are close (e.g. "Paris." against
"Paris, ..."). The prompts here were chosen because their greedy answers keep a wide margin and
came out identical alone and in random batches of 1-24 (40 trials with the engine directly), so a
difference here means streams were mixed up, not rounding.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Server

PROMPTS: list[list[ChatCompletionMessageParam]] = [
    [{"role": "user", "content": "What is the capital of Italy?"}],
    [{"role": "user", "content": "Say hello in French."}],
    [{"role": "user", "content": "Write the numbers from one to ten in words."}],
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
