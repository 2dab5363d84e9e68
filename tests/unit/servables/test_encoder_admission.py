"""Embeddings and rerank bound their queue like LLMs: past max_queued, ServableBusy (503)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphrt.serving import policy as serving_policy
from servables.embeddings.servable import EmbeddingsConfig, EmbeddingsServable
from servables.encoders.batcher import BatchLimits, DynamicBatcher
from servables.encoders.model import EncodedInput
from servables.errors import ServableBusy
from servables.rerank.servable import RerankConfig, RerankServable
from servables.runtime.admission import HasAdmission


class Blocked:
    """A fake inference that waits until released; one vector (or score) per row."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def vectors(self, rows: Sequence[EncodedInput]) -> Any:
        self.release.wait(5)
        return np.ones((len(rows), 4), dtype=np.float32)

    def scores(self, rows: Sequence[EncodedInput]) -> list[float]:
        self.release.wait(5)
        return [0.5] * len(rows)


async def fill(calls: list[Any], servable: Any, blocked: Blocked) -> None:
    """Start the calls, check the next one is refused while they wait, then let them finish."""
    running = [asyncio.ensure_future(call()) for call in calls[:-1]]
    await asyncio.sleep(0.05)
    with pytest.raises(ServableBusy) as refused:
        await calls[-1]()
    assert refused.value.retry_after is not None
    assert "is busy" in refused.value.message
    blocked.release.set()
    await asyncio.gather(*running)
    assert servable.admission.in_flight == 0
    await calls[-1]()  # room again


async def test_embeddings_refuse_past_the_queue_bound(tmp_path: Path) -> None:
    limits = BatchLimits(max_batch_size=1, window=0.0)
    servable = EmbeddingsServable(EmbeddingsConfig("emb", tmp_path, batch=limits))
    assert isinstance(servable, HasAdmission)
    servable.admission.max_queued = 2  # the server's --max_queued_requests
    blocked = Blocked()
    servable.tokenizer = object()  # type: ignore[assignment]  # token ids need no tokenizer
    servable.batcher = DynamicBatcher("emb", blocked.vectors, limits)
    servable.batcher.start()

    def call() -> Any:
        return servable.embed(token_ids=[[1, 2, 3]])

    # capacity 1 (one batch of one row) + 2 queued: the fourth request is refused
    await fill([call] * 4, servable, blocked)
    await servable.stop()


async def test_rerank_refuses_past_the_queue_bound(tmp_path: Path) -> None:
    limits = BatchLimits(max_batch_size=2, window=0.0)
    servable = RerankServable(RerankConfig("rr", tmp_path, batch=limits))
    servable.admission.max_queued = 0
    blocked = Blocked()
    servable.batcher = DynamicBatcher("rr", blocked.scores, limits)
    servable.batcher.start()
    row = EncodedInput(np.array([1, 2], dtype=np.int64))
    servable._pairs = lambda *args: ([row], [0])  # type: ignore[method-assign]

    def call() -> Any:
        return servable.rerank("q", ["d"])

    await fill([call] * 3, servable, blocked)  # capacity 2, no queue: the third is refused
    await servable.stop()


def test_the_serving_policy_bounds_encoder_queues(tmp_path: Path) -> None:
    """--max_queued_requests (or the graph's GRAPHRT_MAX_QUEUED_REQUESTS) reaches them."""
    servables: list[Any] = [
        EmbeddingsServable(EmbeddingsConfig("emb", tmp_path)),
        RerankServable(RerankConfig("rr", tmp_path)),
    ]
    serving_policy.apply(serving_policy.ServingPolicy(), servables, 7)
    assert [servable.admission.max_queued for servable in servables] == [7, 7]
