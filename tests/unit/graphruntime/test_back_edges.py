"""Back edges (LOOPBACK): cycles that re-trigger a node, and runs that end with loops open."""

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
    Timestamp,
    register_calculator,
)
from graphruntime.timestamp import DONE

Event = tuple[Any, ...]


@register_calculator(name="TestBackEdgesHttpLoopCalculator")
class HttpLoop(Calculator):
    """The OVMS HttpLLMCalculator shape: a request starts a generation of N chunks.

    Every chunk goes out with a LOOPBACK packet at the same (own, increasing) timestamp, which
    re-triggers process() through the LOOPBACK sync set; the last chunk sends no loopback.
    """

    blocking = False
    request = Input("HTTP_REQUEST_PAYLOAD", int)
    loopback_in = Input("LOOPBACK", bool)
    response = Output("HTTP_RESPONSE_PAYLOAD", str)
    loopback_out = Output("LOOPBACK", bool)
    log = InputSidePacket("LOG", list, optional=True)

    def open(self, cc: CalculatorContext) -> None:
        self.timestamp = Timestamp(0)
        self.remaining = 0
        self.produced = 0
        self.events: list[Event] = (
            cc.input_side_packets[self.log].payload if cc.input_side_packets.has_tag("LOG") else []
        )

    def process(self, cc: CalculatorContext) -> None:
        request = cc.inputs[self.request]
        loopback = cc.inputs[self.loopback_in]
        self.events.append(
            ("process", int(cc.input_timestamp), not request.is_empty(), not loopback.is_empty())
        )
        if request.is_empty() and loopback.is_empty():
            return  # as OVMS: MediaPipe may call process() with nothing
        if not request.is_empty():
            self.remaining = request.payload
        self.remaining -= 1
        if self.remaining > 0:
            cc.outputs[self.response].add(f"chunk{self.produced}", self.timestamp)
            cc.outputs[self.loopback_out].add(True, self.timestamp)
        else:
            cc.outputs[self.response].add("[DONE]", self.timestamp)
        self.produced += 1
        self.timestamp = self.timestamp.next_allowed_in_stream()

    def close(self, cc: CalculatorContext) -> None:
        self.events.append(("close", int(cc.input_timestamp)))


OVMS_GRAPH = """
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node: {
  name: "LLMExecutor"
  calculator: "TestBackEdgesHttpLoopCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LOG:log"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }
  input_stream_handler {
    input_stream_handler: "SyncSetInputStreamHandler",
    options {
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {
        sync_set {
          tag_index: "LOOPBACK:0"
        }
      }
    }
  }
}
"""


async def test_ovms_loopback_pattern_emits_one_chunk_per_cycle_then_stops() -> None:
    graph = Graph(OVMS_GRAPH)
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("output", lambda _, p: out.append((p.payload, int(p.timestamp))))
    events: list[Event] = []
    await graph.start_run({"log": events})
    await graph.add_packet("input", Packet(4, 0))
    await graph.wait_until_idle()
    assert out == [("chunk0", 0), ("chunk1", 1), ("chunk2", 2), ("[DONE]", 3)]
    # The request, then one call per loopback packet, each at the loopback's timestamp.
    assert events == [
        ("process", 0, True, False),
        ("process", 0, False, True),
        ("process", 1, False, True),
        ("process", 2, False, True),
    ]
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    # LOOPBACK never closed (the node feeds it itself), yet the run ended and close() ran.
    assert events[-1] == ("close", DONE)
    assert not graph.running


async def test_ovms_loopback_pattern_without_waiting_for_idle() -> None:
    graph = Graph(OVMS_GRAPH)
    poller = graph.poll_output_stream("output")
    events: list[Event] = []
    await graph.start_run({"log": events})
    await graph.add_packet("input", Packet(3, 0))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert [p.payload async for p in poller] == ["chunk0", "chunk1", "[DONE]"]
    assert events[-1] == ("close", DONE)


async def test_ovms_graph_is_validated_with_loopback_as_a_back_edge() -> None:
    graph = Graph(OVMS_GRAPH)
    node = graph.validated.node("LLMExecutor")
    # HTTP_REQUEST_PAYLOAD sorts before LOOPBACK, whatever the file order.
    assert node.inputs.names == ("input", "loopback")
    assert node.back_edges == frozenset({1})
    assert node.handler.__name__ == "SyncSetInputStreamHandler"
    assert graph.validated.warnings == ()


async def test_each_request_in_a_run_gets_its_own_generation() -> None:
    graph = Graph(OVMS_GRAPH)
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("output", lambda _, p: out.append((p.payload, int(p.timestamp))))
    await graph.start_run({"log": []})
    await graph.add_packet("input", Packet(2, 0))
    await graph.wait_until_idle()
    await graph.add_packet("input", Packet(2, 10))
    await graph.wait_until_idle()
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [("chunk0", 0), ("[DONE]", 1), ("chunk2", 2), ("[DONE]", 3)]


@register_calculator(name="TestBackEdgesAdderCalculator")
class Adder(Calculator):
    """SUM = VALUE + PREV (PREV missing counts as 0)."""

    blocking = False
    value = Input("VALUE", int)
    previous = Input("PREV", int)
    total = Output("SUM", int)

    def process(self, cc: CalculatorContext) -> None:
        value = cc.inputs[self.value]
        if value.is_empty():
            return
        previous = cc.inputs[self.previous]
        cc.outputs[self.total].add(value.payload + (0 if previous.is_empty() else previous.payload))


RUNNING_SUM = """
input_stream: "in"
output_stream: "sum"
node {
  calculator: "PreviousLoopbackCalculator"
  input_stream: "MAIN:in"
  input_stream: "LOOP:sum"
  input_stream_info: { tag_index: "LOOP" back_edge: true }
  output_stream: "PREV_LOOP:prev_sum"
}
node {
  calculator: "TestBackEdgesAdderCalculator"
  input_stream: "VALUE:in"
  input_stream: "PREV:prev_sum"
  output_stream: "SUM:sum"
}
"""


async def test_previous_loopback_feeds_an_adder_running_sums() -> None:
    graph = Graph(RUNNING_SUM)
    sums: list[tuple[int, int]] = []
    graph.observe_output_stream("sum", lambda _, p: sums.append((p.payload, int(p.timestamp))))
    await graph.start_run()
    for t, value in enumerate([1, 2, 3, 4, 5]):
        await graph.add_packet("in", Packet(value, t * 10))
    graph.close_input_stream("in")
    await graph.wait_until_done()
    assert sums == [(1, 0), (3, 10), (6, 20), (10, 30), (15, 40)]


async def test_previous_loopback_step_by_step() -> None:
    graph = Graph(RUNNING_SUM)
    prev: list[tuple[int, int]] = []
    graph.observe_output_stream("prev_sum", lambda _, p: prev.append((p.payload, int(p.timestamp))))
    await graph.start_run()
    await graph.add_packet("in", Packet(5, 1))
    await graph.wait_until_idle()
    assert prev == []  # nothing before the first packet, only an advanced bound
    await graph.add_packet("in", Packet(7, 2))
    await graph.wait_until_idle()
    assert prev == [(5, 2)]  # the sum for timestamp 1, restamped to 2
    graph.close_all_packet_sources()
    await graph.wait_until_done()


@register_calculator(name="TestBackEdgesUnitDelayCalculator")
class UnitDelay(Calculator):
    """docs/graphs.md "Initial Packet": emit 0 in open(), then each input at t + 1."""

    blocking = False
    source = Input("", int)
    delayed = Output("", int)

    def open(self, cc: CalculatorContext) -> None:
        cc.outputs[self.delayed].add(0, 0)

    def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[self.source]
        cc.outputs[self.delayed].add(packet.payload, int(packet.timestamp) + 1)


async def test_default_handler_loop_primed_by_an_initial_packet_in_open() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node {
          calculator: "TestBackEdgesAdderCalculator"
          input_stream: "VALUE:in"
          input_stream: "PREV:delayed"
          input_stream_info { tag_index: "PREV" back_edge: true }
          output_stream: "SUM:sum"
        }
        node { calculator: "TestBackEdgesUnitDelayCalculator" input_stream: "sum"
               output_stream: "delayed" }
        """
    )
    sums: list[int] = []
    graph.observe_output_stream("sum", lambda _, p: sums.append(p.payload))
    await graph.start_run()
    for t in range(4):
        await graph.add_packet("in", Packet(1, t))
    graph.close_input_stream("in")
    await graph.wait_until_done()
    assert sums == [1, 2, 3, 4]
