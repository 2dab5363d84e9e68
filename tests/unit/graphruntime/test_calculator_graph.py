"""CalculatorGraph: the synchronous facade with MediaPipe's method names."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from graphruntime import (
    AddMode,
    Calculator,
    CalculatorContext,
    CalculatorGraph,
    GraphRunError,
    GraphThrottledError,
    Input,
    Output,
    Packet,
    PacketError,
    StatusStop,
    register_calculator,
)

CHAIN = """
input_stream: "in"
output_stream: "out"
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "a" }
node { calculator: "PassThroughCalculator" input_stream: "a" output_stream: "b" }
node { calculator: "PassThroughCalculator" input_stream: "b" output_stream: "out" }
"""


def test_ten_thousand_packets_through_a_chain_arrive_in_order() -> None:
    graph = CalculatorGraph(CHAIN)
    out: list[tuple[int, int]] = []
    threads: set[int] = set()

    def observe(name: str, packet: Packet[Any]) -> None:
        assert name == "out"
        threads.add(threading.get_ident())
        out.append((packet.payload, int(packet.timestamp)))

    graph.observe_output_stream("out", observe)
    graph.start_run()
    for i in range(10_000):
        graph.add_packet_to_input_stream("in", Packet(i, i))
    graph.close_input_stream("in")
    graph.wait_until_done()
    assert out == [(i, i) for i in range(10_000)]
    # Observers run on the graph's thread, not the caller's.
    assert threads and threading.get_ident() not in threads
    assert not graph.has_error()
    assert graph.get_combined_error_message() == ""


def test_poller_yields_packets_and_ends_with_the_run() -> None:
    graph = CalculatorGraph(CHAIN)
    poller = graph.add_output_stream_poller("out")
    graph.start_run()
    for i in range(5):
        graph.add_packet_to_input_stream("in", i * 2, timestamp=i)
    graph.close()
    assert [(p.payload, int(p.timestamp)) for p in poller] == [(i * 2, i) for i in range(5)]
    assert poller.next(timeout=1) is None


def test_poller_next_returns_packets_as_they_come() -> None:
    graph = CalculatorGraph(CHAIN)
    poller = graph.add_output_stream_poller("out")
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet("x", 3))
    packet = poller.next(timeout=5)
    assert packet is not None and packet.payload == "x" and packet.timestamp == 3
    graph.close()
    assert poller.next(timeout=5) is None


@register_calculator(name="TestCalculatorGraphFailingCalculator")
class Failing(Calculator):
    blocking = False
    source = Input("", int)
    sink = Output("", int)

    def process(self, cc: CalculatorContext) -> None:
        value = cc.inputs[self.source].payload
        if value < 0:
            raise ValueError(f"negative: {value}")
        cc.outputs[self.sink].add(value)


FAILING = """
input_stream: "in"
node { name: "checker" calculator: "TestCalculatorGraphFailingCalculator" input_stream: "in"
       output_stream: "out" }
"""


def test_errors_are_raised_from_wait_until_done() -> None:
    graph = CalculatorGraph(FAILING)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet(1, 0))
    graph.add_packet_to_input_stream("in", Packet(-1, 1))
    graph.close_input_stream("in")
    with pytest.raises(GraphRunError) as caught:
        graph.wait_until_done()
    assert 'Calculator::Process() for node "checker" failed: negative: -1' in caught.value.message
    assert graph.has_error()
    assert 'node "checker" failed: negative: -1' in graph.get_combined_error_message()
    assert out == [1]


def test_add_after_an_error_raises_graph_has_errors() -> None:
    graph = CalculatorGraph(FAILING)
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet(-1, 0))
    graph.wait_until_idle()
    assert graph.has_error()
    with pytest.raises(GraphRunError, match=r"^Graph has errors:"):
        graph.add_packet_to_input_stream("in", Packet(1, 1))
    with pytest.raises(GraphRunError):
        graph.close()


def test_runs_again_after_wait_until_done() -> None:
    graph = CalculatorGraph(CHAIN)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    for run in range(3):
        graph.start_run()
        graph.add_packet_to_input_stream("in", Packet(run, 0))
        graph.close()
    assert out == [0, 1, 2]


def test_properties() -> None:
    graph = CalculatorGraph("max_queue_size: 7\n" + CHAIN)
    assert graph.max_queue_size == 7
    assert 'calculator: "PassThroughCalculator"' in graph.text_config
    assert [node.name for node in graph.validated_graph.nodes] == [
        "PassThroughCalculator_1",
        "PassThroughCalculator_2",
        "PassThroughCalculator_3",
    ]


def test_add_if_not_full_raises_when_throttled() -> None:
    graph = CalculatorGraph("max_queue_size: 1\n" + FAILING, add_mode=AddMode.ADD_IF_NOT_FULL)
    graph.start_run()
    rejected = 0
    for i in range(200):
        try:
            graph.add_packet_to_input_stream("in", Packet(i, i))
        except GraphThrottledError as error:
            assert str(error) == "Graph is throttled."
            rejected += 1
    graph.close()
    assert rejected > 0


def test_wait_mode_never_loses_packets_with_a_tiny_queue() -> None:
    graph = CalculatorGraph("max_queue_size: 1\n" + CHAIN)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.start_run()
    for i in range(500):
        graph.add_packet_to_input_stream("in", Packet(i, i))
    graph.close()
    assert out == list(range(500))


@register_calculator(name="TestCalculatorGraphSourceCalculator")
class Source(Calculator):
    blocking = False
    sink = Output("", int)

    def open(self, cc: CalculatorContext) -> None:
        self.next = 0

    def process(self, cc: CalculatorContext) -> None:
        if self.next == 3:
            raise StatusStop()
        cc.outputs[self.sink].add(self.next, self.next)
        self.next += 1


def test_run_for_a_graph_without_inputs() -> None:
    graph = CalculatorGraph(
        'node { calculator: "TestCalculatorGraphSourceCalculator" output_stream: "out" }'
    )
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.run()
    assert out == [0, 1, 2]


def test_set_input_stream_timestamp_bound() -> None:
    graph = CalculatorGraph(CHAIN)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(int(p.timestamp)))
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet("a", 1))
    graph.set_input_stream_timestamp_bound("in", 10)
    with pytest.raises(PacketError, match="expected timestamp is 10 but received 5"):
        graph.add_packet_to_input_stream("in", Packet("b", 5))
    graph.add_packet_to_input_stream("in", Packet("c", 10))
    graph.close()
    assert out == [1, 10]


def test_a_packet_refused_as_throttled_may_be_added_again() -> None:
    graph = CalculatorGraph("max_queue_size: 1\n" + CHAIN, add_mode=AddMode.ADD_IF_NOT_FULL)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.start_run()
    refused = None
    for t in range(1000):
        try:
            graph.add_packet_to_input_stream("in", Packet(t, t))
        except GraphThrottledError:
            refused = t
            break
    assert refused is not None
    graph.wait_until_idle()
    graph.add_packet_to_input_stream("in", Packet(refused, refused))  # same timestamp again
    graph.close()
    assert out == list(range(refused + 1))


def test_poller_ends_when_the_run_ends_without_wait_until_done() -> None:
    graph = CalculatorGraph(CHAIN)
    poller = graph.add_output_stream_poller("out")
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet("x", 0))
    graph.close_all_packet_sources()
    # Iterating before wait_until_done() must not hang: the poller ends with the run.
    assert [p.payload for p in poller] == ["x"]
    graph.wait_until_done()


def test_poller_serves_every_run() -> None:
    graph = CalculatorGraph(CHAIN)
    poller = graph.add_output_stream_poller("out")
    for run in range(2):
        graph.start_run()
        graph.add_packet_to_input_stream("in", Packet(run, 0))
        graph.close()
        assert [p.payload for p in poller] == [run]


def test_poller_ends_after_run_for_a_source_graph() -> None:
    graph = CalculatorGraph(
        'node { calculator: "TestCalculatorGraphSourceCalculator" output_stream: "out" }'
    )
    poller = graph.add_output_stream_poller("out")
    graph.run()
    assert [p.payload for p in poller] == [0, 1, 2]


@register_calculator(name="TestCalculatorGraphStopOnNegative")
class StopOnNegative(Calculator):
    blocking = False
    source = Input("", int)
    sink = Output("", int)

    def process(self, cc: CalculatorContext) -> None:
        value = cc.inputs[self.source].payload
        if value < 0:
            raise StatusStop()
        cc.outputs[self.sink].add(value)


def test_inputs_closed_by_a_node_refuse_later_packets() -> None:
    """A node's StatusStop closes the graph inputs on the graph's side: the caller hears of it
    at its next add (as Graph.add_packet says), and the run ends cleanly."""
    graph = CalculatorGraph(
        'input_stream: "in"\n'
        'node { calculator: "TestCalculatorGraphStopOnNegative" input_stream: "in" '
        'output_stream: "out" }'
    )
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet(1, 0))
    graph.add_packet_to_input_stream("in", Packet(-1, 1))
    graph.wait_until_idle()
    with pytest.raises(PacketError, match='Graph input stream "in" is closed'):
        graph.add_packet_to_input_stream("in", Packet(2, 2))
    graph.wait_until_done()
    assert out == [1]
    assert not graph.has_error()


def test_producer_threads_on_two_streams_with_a_tiny_queue() -> None:
    """Two producers, one per stream, both throttled often: every packet arrives, in order."""
    graph = CalculatorGraph(
        'max_queue_size: 2\ninput_stream: "a"\ninput_stream: "b"\n'
        'node { calculator: "PassThroughCalculator" input_stream: "a" input_stream: "b" '
        'output_stream: "x" output_stream: "y" }'
    )
    seen: dict[str, list[int]] = {"x": [], "y": []}
    for name in seen:
        graph.observe_output_stream(name, lambda stream, p: seen[stream].append(p.payload))
    graph.start_run()

    def produce(stream: str) -> None:
        for i in range(2000):
            graph.add_packet_to_input_stream(stream, Packet(i, i))

    threads = [threading.Thread(target=produce, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    graph.close()
    assert seen == {"x": list(range(2000)), "y": list(range(2000))}
