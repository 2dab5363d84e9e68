"""Source nodes: called until StatusStop, ordered by source_layer, throttled by full queues."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    GraphUsageError,
    Input,
    InputSidePacket,
    Output,
    Packet,
    StatusStop,
    register_calculator,
)
from graphruntime.timestamp import DONE


@register_calculator(name="TestSourcesCounterCalculator")
class Counter(Calculator):
    """Emits COUNT packets (payload = LABEL + index) at 0, 1, ..., then raises StatusStop."""

    blocking = False
    count = InputSidePacket("COUNT", int)
    label = InputSidePacket("LABEL", str, optional=True)
    log = InputSidePacket("LOG", list, optional=True)
    sink = Output("", str)

    def open(self, cc: CalculatorContext) -> None:
        self.next = 0
        # Optional ports the node config leaves out are absent, not empty (as in MediaPipe).
        sides = cc.input_side_packets
        self.text = sides[self.label].payload if sides.has_tag("LABEL") else ""
        self.events: list[Any] = sides[self.log].payload if sides.has_tag("LOG") else []

    def process(self, cc: CalculatorContext) -> None:
        if self.next >= cc.input_side_packets[self.count].payload:
            self.events.append((self.text, "stop"))
            raise StatusStop()
        assert cc.input_timestamp == 0  # MediaPipe's dummy input timestamp for sources
        self.events.append((self.text, self.next))
        cc.outputs[self.sink].add(f"{self.text}{self.next}", self.next)
        self.next += 1

    def close(self, cc: CalculatorContext) -> None:
        self.events.append((self.text, "close", int(cc.input_timestamp)))


async def test_source_emits_until_status_stop_and_the_run_ends_by_itself() -> None:
    graph = Graph(
        """
        node { calculator: "TestSourcesCounterCalculator" input_side_packet: "COUNT:n"
               input_side_packet: "LOG:log" output_stream: "out" }
        """
    )
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, int(p.timestamp))))
    log: list[Any] = []
    await graph.run({"n": 3, "log": log})
    assert out == [("0", 0), ("1", 1), ("2", 2)]
    assert log == [("", 0), ("", 1), ("", 2), ("", "stop"), ("", "close", DONE)]
    assert not graph.running


async def test_source_output_closes_so_downstream_closes_too() -> None:
    graph = Graph(
        """
        node { calculator: "TestSourcesCounterCalculator" input_side_packet: "COUNT:n"
               output_stream: "raw" }
        node { calculator: "PassThroughCalculator" input_stream: "raw" output_stream: "out" }
        """
    )
    poller = graph.poll_output_stream("out")
    await graph.start_run({"n": 4})
    assert [p.payload async for p in poller] == ["0", "1", "2", "3"]
    await graph.wait_until_done()


async def test_lower_source_layer_is_exhausted_before_a_higher_one_runs() -> None:
    graph = Graph(
        """
        node { calculator: "TestSourcesCounterCalculator" source_layer: 1
               input_side_packet: "COUNT:n" input_side_packet: "LABEL:late"
               input_side_packet: "LOG:log" output_stream: "b" }
        node { calculator: "TestSourcesCounterCalculator" source_layer: 0
               input_side_packet: "COUNT:n" input_side_packet: "LABEL:early"
               input_side_packet: "LOG:log" output_stream: "a" }
        """
    )
    log: list[Any] = []
    await graph.run({"n": 3, "early": "e", "late": "l", "log": log})
    emitted = [entry for entry in log if len(entry) == 2 and isinstance(entry[1], int)]
    assert emitted == [("e", 0), ("e", 1), ("e", 2), ("l", 0), ("l", 1), ("l", 2)]
    # Layer 1 starts only once layer 0 has stopped.
    assert log.index(("e", "stop")) < log.index(("l", 0))


async def test_wait_until_idle_is_refused_with_sources() -> None:
    graph = Graph(
        """
        node { calculator: "TestSourcesCounterCalculator" input_side_packet: "COUNT:n"
               output_stream: "out" }
        """
    )
    await graph.start_run({"n": 2})
    with pytest.raises(GraphUsageError) as caught:
        await graph.wait_until_idle()
    assert str(caught.value) == "wait_until_idle is not supported in graphs with source nodes."
    await graph.wait_until_done()


async def test_close_all_packet_sources_stops_an_endless_source() -> None:
    graph = Graph(
        """
        node { calculator: "TestSourcesCounterCalculator" input_side_packet: "COUNT:n"
               input_side_packet: "LOG:log" output_stream: "out" }
        """
    )
    seen = asyncio.Event()
    count = 0

    def observe(_: str, __: Any) -> None:
        nonlocal count
        count += 1
        if count == 50:
            seen.set()

    graph.observe_output_stream("out", observe)
    log: list[Any] = []
    await graph.start_run({"n": 10**12, "log": log})
    await seen.wait()
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log[-1] == ("", "close", DONE)
    assert ("", "stop") not in log


@register_calculator(name="TestSourcesSlowSinkCalculator")
class SlowSink(Calculator):
    """Async sink that records, at each call, how far the source got ahead of it."""

    probe = InputSidePacket("PROBE", dict)
    source = Input("", str)

    async def process(self, cc: CalculatorContext) -> None:
        probe = cc.input_side_packets[self.probe].payload
        probe["consumed"] += 1
        await asyncio.sleep(0)


@register_calculator(name="TestSourcesProbedCounterCalculator")
class ProbedCounter(Counter):
    probe = InputSidePacket("PROBE", dict)

    def process(self, cc: CalculatorContext) -> None:
        probe = cc.input_side_packets[self.probe].payload
        probe["lead"] = max(probe["lead"], self.next - probe["consumed"])
        super().process(cc)


async def test_sources_are_throttled_by_a_full_downstream_queue() -> None:
    graph = Graph(
        """
        max_queue_size: 3
        node { calculator: "TestSourcesProbedCounterCalculator" input_side_packet: "COUNT:n"
               input_side_packet: "PROBE:probe" output_stream: "raw" }
        node { calculator: "TestSourcesSlowSinkCalculator" input_stream: "raw"
               input_side_packet: "PROBE:probe" }
        """
    )
    probe = {"consumed": 0, "lead": 0}
    await graph.run({"n": 200, "probe": probe})
    assert probe["consumed"] == 200
    # Never more than a queue's worth of packets waiting (plus the one being consumed).
    assert 1 <= probe["lead"] <= 4


@register_calculator(name="TestSourcesBlockingOnceCalculator")
class BlockingOnce(Calculator):
    """A thread-run source whose call waits until the test lets it go, then emits at 5."""

    started = InputSidePacket("STARTED", threading.Event)
    go = InputSidePacket("GO", threading.Event)
    sink = Output("", str)

    def process(self, cc: CalculatorContext) -> None:
        cc.input_side_packets[self.started].payload.set()
        cc.input_side_packets[self.go].payload.wait(5)
        cc.outputs[self.sink].add("s", 5)


@register_calculator(name="TestSourcesPairCalculator")
class Pair(Calculator):
    blocking = False
    a: Input[Any] = Input("A")
    b: Input[Any] = Input("B")
    log = InputSidePacket("LOG", list)

    def process(self, cc: CalculatorContext) -> None:
        seen = tuple(None if p.is_empty() else p.payload for p in cc.inputs)
        cc.input_side_packets[self.log].payload.append((int(cc.input_timestamp), seen))

    def close(self, cc: CalculatorContext) -> None:
        cc.input_side_packets[self.log].payload.append("close")


async def test_source_stopped_while_running_is_closed_so_downstream_can_finish() -> None:
    graph = Graph(
        """
        input_stream: "b"
        node { calculator: "TestSourcesBlockingOnceCalculator" input_side_packet: "STARTED:started"
               input_side_packet: "GO:go" output_stream: "a" }
        node { calculator: "TestSourcesPairCalculator" input_stream: "A:a" input_stream: "B:b"
               input_side_packet: "LOG:log" }
        """
    )
    started, go = threading.Event(), threading.Event()
    log: list[Any] = []
    await graph.start_run({"started": started, "go": go, "log": log})
    await graph.add_packet("b", Packet("b", 10))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    graph.close_all_packet_sources()  # the source's call is still running
    go.set()
    await graph.wait_until_done()
    # b's packet at 10 waits for the source's stream to close; it must not be dropped.
    assert log == [(5, ("s", None)), (10, (None, "b")), "close"]
