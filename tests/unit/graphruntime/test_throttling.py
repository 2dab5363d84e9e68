"""Throttling of graph inputs by max_queue_size, and deadlock resolution."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from graphruntime import (
    AddMode,
    Calculator,
    CalculatorContext,
    Graph,
    GraphRunError,
    GraphThrottledError,
    Input,
    InputSidePacket,
    Output,
    Packet,
    register_calculator,
)


@register_calculator(name="TestThrottlingHeldCalculator")
class Held(Calculator):
    """Async pass-through: reports each timestamp on STARTED, then waits for the GATE event."""

    gate = InputSidePacket("GATE", asyncio.Event)
    started = InputSidePacket("STARTED", asyncio.Queue, optional=True)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    async def process(self, cc: CalculatorContext) -> None:
        started = cc.input_side_packets[self.started]
        if not started.is_empty():
            started.payload.put_nowait(int(cc.input_timestamp))
        event: asyncio.Event = cc.input_side_packets[self.gate].payload
        await event.wait()
        cc.outputs[self.sink].add_packet(cc.inputs[self.source])


def held_graph(max_queue_size: int, report_deadlock: bool = False) -> str:
    return f"""
    max_queue_size: {max_queue_size}
    report_deadlock: {str(report_deadlock).lower()}
    input_stream: "in"
    node {{ calculator: "TestThrottlingHeldCalculator" input_side_packet: "GATE:gate"
           input_side_packet: "STARTED:started" input_stream: "in" output_stream: "out" }}
    """


async def turns(count: int = 10) -> None:
    """Give the loop a few turns; used only to show that something did NOT happen."""
    for _ in range(count):
        await asyncio.sleep(0)


async def test_add_if_not_full_raises_when_the_queue_is_full() -> None:
    graph = Graph(held_graph(2), add_mode=AddMode.ADD_IF_NOT_FULL)
    gate = asyncio.Event()
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run({"gate": gate})
    # Nothing yields between these adds, so both packets are still queued.
    await graph.add_packet("in", Packet(0, 0))
    await graph.add_packet("in", Packet(1, 1))
    assert graph.input_stream_throttled("in")
    with pytest.raises(GraphThrottledError, match=r"^Graph is throttled\.$"):
        await graph.add_packet("in", Packet(2, 2))
    gate.set()
    await graph.wait_until_idle()
    assert not graph.input_stream_throttled("in")
    # The refused packet was not added; its timestamp is still free.
    await graph.add_packet("in", Packet(2, 2))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [0, 1, 2]


async def test_wait_mode_blocks_while_full_then_proceeds() -> None:
    graph = Graph(held_graph(1))
    gate = asyncio.Event()
    started: asyncio.Queue[int] = asyncio.Queue()
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run({"gate": gate, "started": started})
    await graph.add_packet("in", Packet(0, 0))
    assert await started.get() == 0  # the node took packet 0 and waits on the gate
    await graph.add_packet("in", Packet(1, 1))  # queued: the queue is now full
    assert graph.input_stream_throttled("in")
    blocked = asyncio.ensure_future(graph.add_packet("in", Packet(2, 2)))
    await turns()
    assert not blocked.done()
    gate.set()
    await blocked
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [0, 1, 2]


async def test_negative_max_queue_size_disables_throttling() -> None:
    graph = Graph(held_graph(-1), add_mode=AddMode.ADD_IF_NOT_FULL)
    gate = asyncio.Event()
    await graph.start_run({"gate": gate})
    for t in range(500):
        await graph.add_packet("in", Packet(t, t))
    assert not graph.input_stream_throttled("in")
    gate.set()
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_default_max_queue_size_is_100() -> None:
    graph = Graph(held_graph(0), add_mode=AddMode.ADD_IF_NOT_FULL)
    assert graph.validated.max_queue_size == 100
    gate = asyncio.Event()
    await graph.start_run({"gate": gate})
    for t in range(99):
        await graph.add_packet("in", Packet(t, t))
    assert not graph.input_stream_throttled("in")
    await graph.add_packet("in", Packet(99, 99))
    assert graph.input_stream_throttled("in")
    gate.set()
    graph.close_all_packet_sources()
    await graph.wait_until_done()


@register_calculator(name="TestThrottlingPairCalculator")
class Pair(Calculator):
    blocking = False
    left: Input[Any] = Input("LEFT")
    right: Input[Any] = Input("RIGHT")
    log = InputSidePacket("LOG", list)

    def process(self, cc: CalculatorContext) -> None:
        seen = tuple(None if p.is_empty() else p.payload for p in cc.inputs)
        cc.input_side_packets[self.log].payload.append(seen)


def pair_graph(report_deadlock: bool) -> str:
    return f"""
    max_queue_size: 2
    report_deadlock: {str(report_deadlock).lower()}
    input_stream: "a"
    input_stream: "b"
    node {{ calculator: "TestThrottlingPairCalculator" input_stream: "LEFT:a"
           input_stream: "RIGHT:b" input_side_packet: "LOG:log" }}
    """


async def test_deadlock_is_resolved_by_growing_the_full_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[Any] = []
    graph = Graph(pair_graph(report_deadlock=False))
    await graph.start_run({"log": log})
    with caplog.at_level(logging.WARNING, logger="graphruntime.scheduler"):
        # The pair waits for b, so a's queue fills; waiting for room would never end.
        for t in range(5):
            await graph.add_packet("a", Packet(t, t))
    assert "Resolved a deadlock by increasing max_queue_size of input stream" in caplog.text
    assert '"a"' in caplog.text
    assert log == []
    for t in range(5):
        await graph.add_packet("b", Packet(t, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log == [(t, t) for t in range(5)]


async def test_deadlock_is_an_error_with_report_deadlock() -> None:
    graph = Graph(pair_graph(report_deadlock=True))
    await graph.start_run({"log": []})
    await graph.add_packet("a", Packet(0, 0))
    await graph.add_packet("a", Packet(1, 1))
    with pytest.raises(GraphRunError) as caught:
        await graph.add_packet("a", Packet(2, 2))
    message = caught.value.message
    assert message.startswith("Graph has errors:")
    assert (
        'Detected a deadlock due to input throttling for input stream: "a" of a node '
        '"TestThrottlingPairCalculator". All calculators are idle while packet sources remain '
        "active and throttled."
    ) in message
    with pytest.raises(GraphRunError, match="Detected a deadlock"):
        await graph.wait_until_done()


async def test_throttling_applies_to_graph_inputs_upstream_of_the_full_queue() -> None:
    graph = Graph(
        """
        max_queue_size: 1
        input_stream: "in"
        input_stream: "free"
        node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid" }
        node { calculator: "TestThrottlingHeldCalculator" input_side_packet: "GATE:gate"
               input_side_packet: "STARTED:started" input_stream: "mid" output_stream: "out" }
        node { calculator: "PassThroughCalculator" input_stream: "free" output_stream: "free_out" }
        """,
        add_mode=AddMode.ADD_IF_NOT_FULL,
    )
    gate = asyncio.Event()
    started: asyncio.Queue[int] = asyncio.Queue()
    mid: asyncio.Queue[int] = asyncio.Queue()
    graph.observe_output_stream("mid", lambda _, p: mid.put_nowait(int(p.timestamp)))
    await graph.start_run({"gate": gate, "started": started})
    await graph.add_packet("in", Packet(0, 0))
    assert await started.get() == 0
    assert not graph.input_stream_throttled("in")
    await graph.add_packet("in", Packet(1, 1))
    assert await mid.get() == 0
    assert await mid.get() == 1  # the pass-through moved packet 1 into the held node's queue
    # That queue is full: "in" feeds it (through the pass-through) and is throttled ...
    assert graph.input_stream_throttled("in")
    with pytest.raises(GraphThrottledError):
        await graph.add_packet("in", Packet(2, 2))
    # ... while "free", which does not reach it, is not.
    assert not graph.input_stream_throttled("free")
    await graph.add_packet("free", Packet(0, 0))
    gate.set()
    graph.close_all_packet_sources()
    await graph.wait_until_done()
