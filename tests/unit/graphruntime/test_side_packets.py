"""Side packets: given at start_run, produced by nodes, optional, and read back afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorGraph,
    Graph,
    GraphUsageError,
    Input,
    InputSidePacket,
    Output,
    OutputSidePacket,
    Packet,
    register_calculator,
)


@register_calculator(name="TestSideTaggerCalculator")
class Tagger(Calculator):
    """Appends the PREFIX side packet (read in open) to each input; ECHO repeats it (optional)."""

    blocking = False
    prefix = InputSidePacket("PREFIX", str)
    source = Input("", str)
    sink = Output("", str)
    echo = OutputSidePacket("ECHO", str, optional=True)

    def open(self, cc: CalculatorContext) -> None:
        self.text = cc.input_side_packets[self.prefix].payload
        if cc.output_side_packets.has_tag("ECHO"):
            cc.output_side_packets.set(self.echo, self.text + "!")

    def process(self, cc: CalculatorContext) -> None:
        cc.outputs[self.sink].add(self.text + cc.inputs[self.source].payload)


@register_calculator(name="TestSideOptionalCalculator")
class OptionalUser(Calculator):
    blocking = False
    source = Input("", str)
    sink = Output("", str)
    suffix = InputSidePacket("SUFFIX", str, optional=True)

    def open(self, cc: CalculatorContext) -> None:
        packet = cc.input_side_packets[self.suffix]
        self.suffix_text = "<none>" if packet.is_empty() else packet.payload

    def process(self, cc: CalculatorContext) -> None:
        cc.outputs[self.sink].add(cc.inputs[self.source].payload + self.suffix_text)


@register_calculator(name="TestSideLateProducerCalculator")
class LateProducer(Calculator):
    """Produces its COUNT side packet in close(), after it has seen every input."""

    blocking = False
    source = Input("", str)
    count = OutputSidePacket("COUNT", str)

    def open(self, cc: CalculatorContext) -> None:
        self.seen = 0

    def process(self, cc: CalculatorContext) -> None:
        self.seen += 1

    def close(self, cc: CalculatorContext) -> None:
        cc.output_side_packets.set(self.count, f"n={self.seen}:")


async def run_collect(
    graph: Graph, side_packets: dict[str, Any], stream: str, values: list[str]
) -> list[str]:
    out: list[str] = []
    graph.observe_output_stream(stream, lambda _, p: out.append(p.payload))
    await graph.start_run(side_packets)
    for t, value in enumerate(values):
        await graph.add_packet("in", Packet(value, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return out


async def test_input_side_packet_reaches_open() -> None:
    graph = Graph(
        """
        input_stream: "in"
        input_side_packet: "prefix"
        node { calculator: "TestSideTaggerCalculator" input_side_packet: "PREFIX:prefix"
               input_stream: "in" output_stream: "out" }
        """
    )
    assert await run_collect(graph, {"prefix": ">"}, "out", ["a", "b"]) == [">a", ">b"]


async def test_side_packet_may_be_given_as_a_packet() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestSideTaggerCalculator" input_side_packet: "PREFIX:prefix"
               input_stream: "in" output_stream: "out" }
        """
    )
    assert await run_collect(graph, {"prefix": Packet("#")}, "out", ["a"]) == ["#a"]


async def test_output_side_packet_feeds_another_nodes_input_side_packet() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestSideTaggerCalculator" input_stream: "in" output_stream: "mid"
               input_side_packet: "PREFIX:second" }
        node { calculator: "TestSideTaggerCalculator" input_stream: "in" output_stream: "first"
               input_side_packet: "PREFIX:prefix" output_side_packet: "ECHO:second" }
        """
    )
    # The consumer is written first; sorting opens the producer before it.
    assert [node.calculator_name for node in graph.validated.nodes] == [
        "TestSideTaggerCalculator",
        "TestSideTaggerCalculator",
    ]
    assert graph.validated.nodes[0].output_side_packets.names == ("second",)
    assert graph.validated.external_side_packets == {"prefix": True}
    assert await run_collect(graph, {"prefix": "p"}, "mid", ["x"]) == ["p!x"]
    assert graph.get_output_side_packet("second").payload == "p!"


async def test_consumer_of_a_late_side_packet_opens_when_it_is_produced() -> None:
    graph = Graph(
        """
        input_stream: "in"
        input_stream: "late_in"
        node { calculator: "TestSideLateProducerCalculator" input_stream: "in"
               output_side_packet: "COUNT:count" }
        node { calculator: "TestSideTaggerCalculator" input_side_packet: "PREFIX:count"
               input_stream: "late_in" output_stream: "out" }
        """
    )
    out: list[str] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run()
    for t in range(3):
        await graph.add_packet("in", Packet("v", t))
        await graph.add_packet("late_in", Packet(str(t), t))
    await graph.wait_until_idle()
    # The tagger cannot open before its side packet exists; its input packets wait for it.
    assert out == []
    graph.close_input_stream("in")
    await graph.wait_until_idle()
    assert out == ["n=3:0", "n=3:1", "n=3:2"]
    graph.close_input_stream("late_in")
    await graph.wait_until_done()
    assert graph.get_output_side_packet("count").payload == "n=3:"


async def test_pass_through_forwards_side_packets() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out"
               input_side_packet: "MODEL:m" output_side_packet: "MODEL:m_copy" }
        """
    )
    assert await run_collect(graph, {"m": "weights"}, "out", ["a"]) == ["a"]
    assert graph.get_output_side_packet("m_copy").payload == "weights"
    with pytest.raises(GraphUsageError, match=r'Side packet "nope" has not been produced\.'):
        graph.get_output_side_packet("nope")


async def test_optional_side_packet_may_be_omitted_or_given() -> None:
    text = """
    input_stream: "in"
    node { calculator: "TestSideOptionalCalculator" input_side_packet: "SUFFIX:suffix"
           input_stream: "in" output_stream: "out" }
    """
    graph = Graph(text)
    assert graph.validated.external_side_packets == {"suffix": False}
    assert await run_collect(graph, {}, "out", ["a"]) == ["a<none>"]
    assert await run_collect(Graph(text), {"suffix": "?"}, "out", ["a"]) == ["a?"]


async def test_missing_required_side_packet_lists_each_name() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestSideTaggerCalculator" input_side_packet: "PREFIX:p1"
               input_stream: "in" output_stream: "o1" }
        node { calculator: "TestSideTaggerCalculator" input_side_packet: "PREFIX:p2"
               input_stream: "in" output_stream: "o2" }
        """
    )
    with pytest.raises(GraphUsageError) as caught:
        await graph.start_run({"p2": "x"})
    assert str(caught.value) == 'Side packet "p1" is required but was not provided.'
    with pytest.raises(GraphUsageError) as caught:
        await graph.start_run()
    assert str(caught.value) == (
        'Side packet "p1" is required but was not provided.; '
        'Side packet "p2" is required but was not provided.'
    )


def test_side_packets_through_the_sync_facade() -> None:
    graph = CalculatorGraph(
        """
        input_stream: "in"
        node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out"
               input_side_packet: "m" output_side_packet: "m_copy" }
        """
    )
    graph.start_run({"m": 41})
    graph.close()
    assert graph.get_output_side_packet("m_copy").payload == 41


opened: list[str] = []


@register_calculator(name="TestSideCountedOpenCalculator")
class CountedOpen(Calculator):
    """Records each open(); passes its PREFIX side packet on as ECHO."""

    blocking = False
    prefix = InputSidePacket("PREFIX", str)
    source = Input("", str)
    echo = OutputSidePacket("ECHO", str)

    def open(self, cc: CalculatorContext) -> None:
        opened.append(cc.node_name)
        cc.output_side_packets.set(self.echo, cc.input_side_packets[self.prefix].payload)

    def process(self, cc: CalculatorContext) -> None:
        pass


async def test_a_node_fed_by_a_side_packet_made_in_an_earlier_open_opens_once() -> None:
    opened.clear()
    graph = Graph(
        """
        input_stream: "in"
        node { name: "first" calculator: "TestSideCountedOpenCalculator" input_stream: "in"
               input_side_packet: "PREFIX:prefix" output_side_packet: "ECHO:echo" }
        node { name: "second" calculator: "TestSideCountedOpenCalculator" input_stream: "in"
               input_side_packet: "PREFIX:echo" output_side_packet: "ECHO:echo2" }
        """
    )
    await graph.start_run({"prefix": "p"})
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert opened == ["first", "second"]
    assert graph.get_output_side_packet("echo2").payload == "p"
