"""The frontend's side of an engine step: which streams wake first."""

from __future__ import annotations

import asyncio

from servables.engine.client import EngineClient, RequestStream
from servables.engine.messages import EngineMetrics, EngineSpec, SequenceDelta, StepOutputs


def delta(request_id: int, finish_reason: str | None) -> SequenceDelta:
    return SequenceDelta(request_id, 0, [7], [], finish_reason)


async def test_streams_whose_request_finished_wake_first() -> None:
    """A finished request's client sends its next request as soon as it has the end of the
    stream, and the engine waits for that successor only briefly (servables/engine/refill.py):
    so the finished streams run first in the loop turn that the step's outputs wake."""
    client = EngineClient(EngineSpec("LM_CB", "/nowhere", "CPU", {}, {}), "m")
    woken: list[int] = []

    async def consume(request_id: int) -> None:
        stream = RequestStream([request_id], client)
        client._streams[request_id] = stream
        await stream.next_batch()
        woken.append(request_id)

    consumers = [asyncio.create_task(consume(request_id)) for request_id in (1, 2, 3, 4)]
    await asyncio.sleep(0)  # every consumer now waits for its first delta
    step = [delta(1, None), delta(2, "length"), delta(3, None), delta(4, "stop")]
    client._dispatch(None, StepOutputs(step, [], EngineMetrics(), 0.05))  # type: ignore[arg-type]
    await asyncio.gather(*consumers)
    assert woken == [2, 4, 1, 3]
