"""Getting outputs out of a Graph: observer callbacks and async pollers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    GraphRunError,
    Input,
    Output,
    Packet,
    register_calculator,
)

CHAIN = """
input_stream: "in"
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid" }
node { calculator: "PassThroughCalculator" input_stream: "mid" output_stream: "out" }
"""


async def test_observer_gets_stream_name_and_packets_in_order_on_the_loop() -> None:
    graph = Graph(CHAIN)
    seen: list[tuple[str, Any, int]] = []
    loop = asyncio.get_running_loop()
    loops: set[asyncio.AbstractEventLoop] = set()

    def observe(name: str, packet: Packet[Any]) -> None:
        loops.add(asyncio.get_running_loop())
        seen.append((name, packet.payload, int(packet.timestamp)))

    graph.observe_output_stream("out", observe)
    await graph.start_run()
    for t in range(3):
        await graph.add_packet("in", Packet(t * 10, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert seen == [("out", 0, 0), ("out", 10, 1), ("out", 20, 2)]
    assert loops == {loop}


async def test_several_observers_and_inner_and_input_streams_can_be_observed() -> None:
    graph = Graph(CHAIN)
    got: dict[str, list[int]] = {"in": [], "mid": [], "out": [], "out2": []}
    graph.observe_output_stream("in", lambda n, p: got[n].append(p.payload))
    graph.observe_output_stream("mid", lambda n, p: got[n].append(p.payload))
    graph.observe_output_stream("out", lambda n, p: got[n].append(p.payload))
    graph.observe_output_stream("out", lambda _, p: got["out2"].append(p.payload))
    await graph.start_run()
    await graph.add_packet("in", Packet(5, 0))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert got == {"in": [5], "mid": [5], "out": [5], "out2": [5]}


async def test_a_failing_observer_fails_the_run() -> None:
    graph = Graph(CHAIN)

    def observe(_: str, packet: Packet[Any]) -> None:
        raise RuntimeError(f"cannot take {packet.payload}")

    graph.observe_output_stream("out", observe)
    await graph.start_run()
    await graph.add_packet("in", Packet("p", 0))
    graph.close_all_packet_sources()
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    assert 'Observer of output stream "out" failed: cannot take p' in caught.value.message


async def test_poller_iterates_while_the_graph_runs() -> None:
    graph = Graph(CHAIN)
    poller = graph.poll_output_stream("out")
    await graph.start_run()
    await graph.add_packet("in", Packet("first", 1))
    first = await anext(poller)
    assert (first.payload, first.timestamp) == ("first", 1)
    await graph.add_packet("in", Packet("second", 2))
    graph.close_input_stream("in")
    rest = [p.payload async for p in poller]
    assert rest == ["second"]
    await graph.wait_until_done()


async def test_poller_ends_when_its_stream_closes_before_the_run_ends() -> None:
    graph = Graph(
        """
        input_stream: "a"
        input_stream: "b"
        node { calculator: "PassThroughCalculator" input_stream: "a" output_stream: "a_out" }
        node { calculator: "PassThroughCalculator" input_stream: "b" output_stream: "b_out" }
        """
    )
    poller = graph.poll_output_stream("a_out")
    await graph.start_run()
    await graph.add_packet("a", Packet(1, 0))
    graph.close_input_stream("a")
    assert [p.payload async for p in poller] == [1]
    assert graph.running  # b is still open
    graph.close_input_stream("b")
    await graph.wait_until_done()


@register_calculator(name="TestPollersExplodingCalculator")
class Exploding(Calculator):
    blocking = False
    source = Input("", int)
    sink = Output("", int)

    def process(self, cc: CalculatorContext) -> None:
        value = cc.inputs[self.source].payload
        if value == 2:
            raise ValueError("two is too many")
        cc.outputs[self.sink].add(value)


async def test_poller_raises_the_runs_error_after_the_packets_before_it() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { name: "x" calculator: "TestPollersExplodingCalculator" input_stream: "in"
               output_stream: "out" }
        """
    )
    poller = graph.poll_output_stream("out")
    await graph.start_run()
    for t in range(4):
        try:
            await graph.add_packet("in", Packet(t, t))
        except GraphRunError:
            break
    graph.close_all_packet_sources()
    received: list[int] = []
    with pytest.raises(GraphRunError, match='Calculator::Process\\(\\) for node "x" failed'):
        async for packet in poller:
            received.append(packet.payload)
    assert received == [0, 1]
    with pytest.raises(GraphRunError):
        await graph.wait_until_done()


async def test_poller_of_a_stream_that_never_closes_ends_with_the_run() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node {
          calculator: "PassThroughCalculator"
          input_stream: "in" input_stream: "loop"
          output_stream: "out" output_stream: "loop"
          input_stream_info { tag_index: ":1" back_edge: true }
          input_stream_handler { input_stream_handler: "ImmediateInputStreamHandler" }
        }
        """
    )
    poller = graph.poll_output_stream("loop")
    await graph.start_run()
    graph.close_all_packet_sources()
    assert [p async for p in poller] == []
    await graph.wait_until_done()
