"""Timestamp bounds: explicit bounds, offset propagation, and bound observation."""

from __future__ import annotations

from typing import Any

from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    Input,
    InputSidePacket,
    Output,
    Packet,
    register_calculator,
)
from graphruntime.timestamp import DONE

Call = tuple[Any, ...]


@register_calculator(name="TestBoundsPairCalculator")
class Pair(Calculator):
    """Default handler over two inputs; logs what each process() call sees."""

    blocking = False
    left: Input[Any] = Input("LEFT")
    right: Input[Any] = Input("RIGHT")
    log = InputSidePacket("LOG", list)

    def process(self, cc: CalculatorContext) -> None:
        seen = tuple(None if p.is_empty() else p.payload for p in cc.inputs)
        cc.input_side_packets[self.log].payload.append((int(cc.input_timestamp), seen))


@register_calculator(name="TestBoundsEvenOnlyCalculator")
class EvenOnly(Calculator):
    """Forwards even payloads; declares no offset, so odd timestamps leave the bound behind."""

    blocking = False
    source = Input("", int)
    sink = Output("", int)

    def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[self.source]
        if packet.payload % 2 == 0:
            cc.outputs[self.sink].add_packet(packet)


@register_calculator(name="TestBoundsEvenOnlyWithBoundCalculator")
class EvenOnlyWithBound(EvenOnly):
    """Like EvenOnly, but promises each dropped timestamp away with set_next_timestamp_bound."""

    def process(self, cc: CalculatorContext) -> None:
        super().process(cc)
        cc.outputs[self.sink].set_next_timestamp_bound(cc.input_timestamp + 1)


@register_calculator(name="TestBoundsEvenOnlyWithOffsetCalculator")
class EvenOnlyWithOffset(EvenOnly):
    timestamp_offset = 0


def filtered_pair_graph(filter_calculator: str) -> str:
    return f"""
    input_stream: "in"
    node {{ calculator: "{filter_calculator}" input_stream: "in" output_stream: "even" }}
    node {{
      calculator: "TestBoundsPairCalculator"
      input_stream: "LEFT:in"
      input_stream: "RIGHT:even"
      input_side_packet: "LOG:log"
    }}
    """


async def feed(graph: Graph, values: list[int]) -> None:
    for t, value in enumerate(values):
        await graph.add_packet("in", Packet(value, t))


async def test_without_offset_or_bound_the_downstream_node_waits() -> None:
    log: list[Call] = []
    graph = Graph(filtered_pair_graph("TestBoundsEvenOnlyCalculator"))
    await graph.start_run({"log": log})
    await feed(graph, [0, 1, 3, 4])
    await graph.wait_until_idle()
    # Dropping 1 and 2 leaves RIGHT's bound at 1; the packet at 3 then settles 1, 2 and 3.
    assert log == [(0, (0, 0)), (1, (1, None)), (2, (3, None)), (3, (4, 4))]
    log.clear()
    await graph.add_packet("in", Packet(5, 4))
    await graph.wait_until_idle()
    assert log == []  # nothing promises that 4 is settled on RIGHT
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log == [(4, (5, None))]


async def test_set_next_timestamp_bound_lets_downstream_proceed() -> None:
    log: list[Call] = []
    graph = Graph(filtered_pair_graph("TestBoundsEvenOnlyWithBoundCalculator"))
    await graph.start_run({"log": log})
    await feed(graph, [1])
    await graph.wait_until_idle()
    assert log == [(0, (1, None))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_timestamp_offset_propagates_the_bound() -> None:
    log: list[Call] = []
    graph = Graph(filtered_pair_graph("TestBoundsEvenOnlyWithOffsetCalculator"))
    await graph.start_run({"log": log})
    await feed(graph, [2, 1, 3])
    await graph.wait_until_idle()
    assert log == [(0, (2, 2)), (1, (1, None)), (2, (3, None))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_gate_dropping_a_packet_lets_a_two_input_default_node_proceed() -> None:
    log: list[Call] = []
    graph = Graph(
        """
        input_stream: "in"
        input_stream: "allow"
        node {
          calculator: "GateCalculator"
          input_stream: "in"
          input_stream: "ALLOW:allow"
          output_stream: "gated"
        }
        node {
          calculator: "TestBoundsPairCalculator"
          input_stream: "LEFT:in"
          input_stream: "RIGHT:gated"
          input_side_packet: "LOG:log"
        }
        """
    )
    await graph.start_run({"log": log})
    await graph.add_packet("in", Packet("x", 1))
    await graph.add_packet("allow", Packet(False, 1))
    await graph.wait_until_idle()
    # The gate dropped 1 but its offset moved the bound, so the pair ran without waiting.
    assert log == [(1, ("x", None))]
    await graph.add_packet("in", Packet("y", 2))
    await graph.add_packet("allow", Packet(True, 2))
    await graph.wait_until_idle()
    assert log[1:] == [(2, ("y", "y"))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


@register_calculator(name="TestBoundsBoundSetterCalculator")
class BoundSetter(Calculator):
    """For input payload ("bound", b) raises the output bound to b; ("packet", t) emits at t."""

    blocking = False
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    def process(self, cc: CalculatorContext) -> None:
        kind, value = cc.inputs[self.source].payload
        if kind == "bound":
            cc.outputs[self.sink].set_next_timestamp_bound(value)
        else:
            cc.outputs[self.sink].add(kind, value)


async def test_observe_timestamp_bounds_reports_bounds_as_empty_packets() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestBoundsBoundSetterCalculator" input_stream: "in"
               output_stream: "out" }
        """
    )
    seen: list[tuple[str, Any, int]] = []
    plain: list[int] = []

    def observe(name: str, packet: Packet[Any]) -> None:
        seen.append((name, None if packet.is_empty() else packet.payload, int(packet.timestamp)))

    graph.observe_output_stream("out", observe, observe_timestamp_bounds=True)
    graph.observe_output_stream("out", lambda _, p: plain.append(int(p.timestamp)))
    await graph.start_run()
    await graph.add_packet("in", Packet(("bound", 10), 0))
    await graph.add_packet("in", Packet(("packet", 12), 1))
    await graph.add_packet("in", Packet(("bound", 20), 2))
    graph.close_input_stream("in")
    await graph.wait_until_done()
    # Bound 10 settles 9; the packet itself; bound 20 settles 19. Closing (Done) is not reported.
    assert seen == [("out", None, 9), ("out", "packet", 12), ("out", None, 19)]
    assert plain == [12]


async def test_output_bound_is_visible_to_the_calculator() -> None:
    bounds: list[int] = []

    @register_calculator(name="TestBoundsBoundReaderCalculator")
    class BoundReader(Calculator):
        blocking = False
        source: Input[Any] = Input("")
        sink: Output[Any] = Output("")

        def process(self, cc: CalculatorContext) -> None:
            handle = cc.outputs[self.sink]
            bounds.append(int(handle.next_timestamp_bound))
            handle.add(1)
            bounds.append(int(handle.next_timestamp_bound))

        def close(self, cc: CalculatorContext) -> None:
            cc.outputs[self.sink].close()
            bounds.append(int(cc.outputs[self.sink].next_timestamp_bound))

    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestBoundsBoundReaderCalculator" input_stream: "in" output_stream: "o" }
        """
    )
    await graph.start_run()
    await graph.add_packet("in", Packet(0, 5))
    graph.close_input_stream("in")
    await graph.wait_until_done()
    assert bounds[1:] == [6, DONE]


class WatchNothing:
    """A GraphObserver whose runs ignore every event. Attaching one sends every node call
    through the scheduler's general path (the handler's take(), then _invoke) instead of the
    path that pops a one-input node's queue right in the pump (GraphRun._step_fifo)."""

    def run_started(self, run: Any) -> Any:
        class Ignore:
            def process(self, *args: Any) -> None: ...
            def lifecycle(self, *args: Any) -> None: ...
            def packet(self, *args: Any) -> None: ...
            def finished(self, *args: Any) -> None: ...

        return Ignore()


async def run_filtered_chain(observed: bool) -> tuple[list[Call], list[tuple[Any, int]]]:
    """in -> EvenOnlyWithOffset -> PassThrough -> Pair(in, ...), with bounds observed."""
    log: list[Call] = []
    seen: list[tuple[Any, int]] = []
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestBoundsEvenOnlyWithOffsetCalculator" input_stream: "in"
               output_stream: "even" }
        node { calculator: "PassThroughCalculator" input_stream: "even" output_stream: "copy" }
        node {
          calculator: "TestBoundsPairCalculator"
          input_stream: "LEFT:in"
          input_stream: "RIGHT:copy"
          input_side_packet: "LOG:log"
        }
        """,
        observers=[WatchNothing()] if observed else [],
    )
    graph.observe_output_stream(
        "copy",
        lambda _, p: seen.append((None if p.is_empty() else p.payload, int(p.timestamp))),
        observe_timestamp_bounds=True,
    )
    await graph.start_run({"log": log})
    # A bound raised behind queued packets (the node passes it on after its last packet)...
    await graph.add_packet("in", Packet(2, 0))
    await graph.add_packet("in", Packet(1, 1))
    graph.set_input_stream_timestamp_bound("in", 5)
    await graph.wait_until_idle()
    await graph.add_packet("in", Packet(3, 5))
    await graph.wait_until_idle()
    # ...and one raised on an empty queue (passed on without a call).
    graph.set_input_stream_timestamp_bound("in", 8)
    await graph.wait_until_idle()
    await graph.add_packet("in", Packet(4, 8))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return log, seen


async def test_one_input_nodes_run_from_their_queue_as_through_their_handler() -> None:
    import calculators.core.pass_through  # noqa: F401  (registers PassThroughCalculator)

    log, seen = await run_filtered_chain(observed=False)
    general_log, general_seen = await run_filtered_chain(observed=True)
    assert log == general_log == [(0, (2, 2)), (1, (1, None)), (5, (3, None)), (8, (4, 4))]
    # Dropped packets and raised input bounds reach the end of the chain as bounds. The general
    # path also reports bound 2 (settling 1), which bound 5 overtakes before PassThrough runs
    # on the queue path: a bound may be passed on late, as when MediaPipe's threads race.
    assert seen == [(2, 0), (None, 4), (None, 5), (None, 7), (4, 8)]
    assert general_seen == [(2, 0), (None, 1), *seen[1:]]
