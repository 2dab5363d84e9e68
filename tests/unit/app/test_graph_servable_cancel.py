"""A request's graph run is waited for to the end even when the request's task is cancelled
while it cleans up (a client gone mid-stream: the write fails, then aiohttp cancels the handler)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from graphrt.serving.graph_servable import GraphDefinition, GraphServable, State
from graphruntime import (
    Calculator,
    CalculatorContext,
    Input,
    InputSidePacket,
    Packet,
    register_calculator,
)


@register_calculator(name="TestSlowToCloseCalculator")
class SlowToClose(Calculator):
    """process() never ends by itself; close() waits for the test's go-ahead."""

    events = InputSidePacket("EVENTS", dict)
    source: Input[Any] = Input("")

    async def process(self, cc: CalculatorContext) -> None:
        cc.input_side_packets[self.events].payload["started"].set()
        await asyncio.Event().wait()

    async def close(self, cc: CalculatorContext) -> None:
        events = cc.input_side_packets[self.events].payload
        events["closing"].set()
        await events["release"].wait()
        events["closed"].set()


GRAPH = """
input_stream: "in"
node { calculator: "TestSlowToCloseCalculator" input_stream: "in" input_side_packet: "EVENTS:e" }
"""


async def test_a_cancelled_cleanup_still_waits_for_the_run_and_frees_the_slot() -> None:
    servable = GraphServable(GraphDefinition("slow", Path("."), graph_text=GRAPH))
    await servable.load()
    assert servable.state is State.AVAILABLE, servable.error
    events = {name: asyncio.Event() for name in ("started", "closing", "release", "closed")}

    async def request() -> None:
        async with servable.graph_run() as graph:
            await graph.start_run({"e": events})
            await graph.add_packet("in", Packet(1, 0))
            await events["started"].wait()
            raise ConnectionResetError("the client went away")  # the handler starts cleaning up

    task = asyncio.create_task(request())
    await events["closing"].wait()
    task.cancel()  # aiohttp cancels the handler for the lost connection
    await asyncio.sleep(0.05)
    try:
        assert not task.done(), "the cleanup stopped waiting for the calculator to close"
        assert servable.in_flight == 1
    finally:
        events["release"].set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events["closed"].is_set()
    assert servable.in_flight == 0
    await asyncio.wait_for(servable.unload(), 5)  # not held up by a leaked request
