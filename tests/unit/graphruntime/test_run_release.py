"""A finished run lets go of itself: it is freed by reference counting, with no help from the
cyclic garbage collector, and a calculator that kept its context gets clear errors from it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    GraphError,
    Input,
    InputSidePacket,
    Output,
    OutputSidePacket,
    Packet,
    register_calculator,
)
from graphruntime.streams import StreamError

alive: list[weakref.ref[KeepsItsContext]] = []


@register_calculator(name="TestReleaseKeepsItsContextCalculator")
class KeepsItsContext(Calculator):
    """Prefixes its input, sets a side packet, and keeps its context (as calculators may)."""

    blocking = False
    prefix = InputSidePacket("PREFIX", str)
    source = Input("", str)
    sink = Output("", str)
    echo = OutputSidePacket("ECHO", str)

    def open(self, cc: CalculatorContext) -> None:
        alive.append(weakref.ref(self))
        self.kept = cc
        self.text = cc.input_side_packets[self.prefix].payload
        cc.output_side_packets.set(self.echo, self.text)

    def process(self, cc: CalculatorContext) -> None:
        cc.outputs[self.sink].add(self.text + cc.inputs[self.source].payload)


GRAPH = """
input_stream: "in"
input_side_packet: "prefix"
node { calculator: "TestReleaseKeepsItsContextCalculator" input_side_packet: "PREFIX:prefix"
       input_stream: "in" output_stream: "mid" output_side_packet: "ECHO:echo" }
node { calculator: "TestReleaseKeepsItsContextCalculator" input_side_packet: "PREFIX:echo"
       input_stream: "mid" output_stream: "out" output_side_packet: "ECHO:echo2" }
"""


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    alive.clear()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        alive.clear()


async def run_once(graph: Graph) -> list[str]:
    out: list[str] = []
    graph.observe_output_stream("out", lambda _, packet: out.append(packet.payload))
    await graph.start_run({"prefix": ">"})
    for timestamp, value in enumerate(["a", "b"]):
        await graph.add_packet("in", Packet(value, timestamp))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return out


async def test_a_finished_run_is_freed_by_reference_counting(no_cycle_collector: None) -> None:
    graph = Graph(GRAPH)
    assert await run_once(graph) == [">>a", ">>b"]
    assert graph.get_output_side_packet("echo2").payload == ">"  # still readable after the run
    assert len(alive) == 2 and all(ref() is not None for ref in alive)
    del graph
    for _ in range(3):  # the callbacks the run's end woke (its pollers' end) hold it until run
        await asyncio.sleep(0)
    assert [ref() for ref in alive] == [None, None]


async def test_a_kept_context_refuses_work_after_the_run_with_clear_errors(
    no_cycle_collector: None,
) -> None:
    graph = Graph(GRAPH)
    await run_once(graph)
    calculator = alive[0]()
    assert calculator is not None
    with pytest.raises(StreamError, match='Packet sent to closed stream "mid"'):
        calculator.kept.outputs[calculator.sink].add("late", 5)
    with pytest.raises(GraphError, match='"echo" was set after the graph run finished'):
        calculator.kept.output_side_packets.set(calculator.echo, "late")
    assert graph.get_output_side_packet("echo").payload == ">"
