"""Running a Graph again, and cancelling a run."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    GraphRunError,
    Input,
    InputSidePacket,
    Output,
    Packet,
    ValidatedGraph,
    register_calculator,
)
from graphruntime.timestamp import DONE

Event = tuple[Any, ...]


@register_calculator(name="TestRunControlCountingCalculator")
class Counting(Calculator):
    """Numbers its packets; the count lives on the instance, so it restarts with each run."""

    blocking = False
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")
    fail_on: InputSidePacket[Any] = InputSidePacket("FAIL_ON", optional=True)

    def open(self, cc: CalculatorContext) -> None:
        self.count = 0
        sides = cc.input_side_packets
        self.bad = sides[self.fail_on].payload if sides.has_tag("FAIL_ON") else None

    def process(self, cc: CalculatorContext) -> None:
        payload = cc.inputs[self.source].payload
        if payload == self.bad:
            raise ValueError(f"bad payload {payload!r}")
        cc.outputs[self.sink].add((self.count, payload))
        self.count += 1


TEXT = """
input_stream: "in"
node { calculator: "TestRunControlCountingCalculator" input_stream: "in" output_stream: "out"
       input_side_packet: "FAIL_ON:fail_on" }
"""


async def one_run(graph: Graph, payloads: list[str], fail_on: str = "") -> None:
    await graph.start_run({"fail_on": fail_on})
    for t, payload in enumerate(payloads):
        await graph.add_packet("in", Packet(payload, t))
    graph.close_input_stream("in")
    await graph.wait_until_done()


async def test_a_graph_runs_again_with_fresh_calculators() -> None:
    graph = Graph(TEXT)
    out: list[Any] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await one_run(graph, ["a", "b"])
    await one_run(graph, ["c"])
    # Observers stay for every run; the counter restarted, so the calculator is new.
    assert out == [(0, "a"), (1, "b"), (0, "c")]


async def test_a_failed_run_does_not_leak_into_the_next() -> None:
    graph = Graph(TEXT)
    out: list[Any] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    with pytest.raises(GraphRunError, match="bad payload 'x'"):
        await one_run(graph, ["a", "x", "b"], fail_on="x")
    failed = graph.has_error
    assert failed
    await one_run(graph, ["x"], fail_on="nothing")
    assert not graph.has_error
    assert out[-1] == (0, "x")


async def test_pollers_belong_to_the_next_run_only() -> None:
    graph = Graph(TEXT)
    first = graph.poll_output_stream("out")
    await one_run(graph, ["a"])
    second = graph.poll_output_stream("out")
    await one_run(graph, ["b"])
    assert [p.payload async for p in first] == [(0, "a")]
    assert [p.payload async for p in second] == [(0, "b")]


async def test_one_validated_graph_backs_concurrent_runs() -> None:
    validated = ValidatedGraph.from_config(TEXT)
    graphs = [Graph(validated) for _ in range(3)]
    outs: list[list[Any]] = [[] for _ in graphs]
    for graph, out in zip(graphs, outs, strict=True):

        def observe(_: str, packet: Packet[Any], out: list[Any] = out) -> None:
            out.append(packet.payload[1])

        graph.observe_output_stream("out", observe)
    await asyncio.gather(
        *(one_run(graph, [f"{i}{j}" for j in range(20)]) for i, graph in enumerate(graphs))
    )
    for i, out in enumerate(outs):
        assert out == [f"{i}{j}" for j in range(20)]


@register_calculator(name="TestRunControlStuckCalculator")
class Stuck(Calculator):
    """An async process() that never finishes by itself."""

    log = InputSidePacket("LOG", list)
    started = InputSidePacket("STARTED", asyncio.Event)
    source: Input[Any] = Input("")

    async def process(self, cc: CalculatorContext) -> None:
        log: list[Event] = cc.input_side_packets[self.log].payload
        log.append(("process", int(cc.input_timestamp)))
        cc.input_side_packets[self.started].payload.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            log.append(("cancelled",))
            raise

    async def close(self, cc: CalculatorContext) -> None:
        error = cc.graph_error.message if cc.graph_error else None
        cc.input_side_packets[self.log].payload.append(("close", int(cc.input_timestamp), error))


async def test_cancel_stops_a_running_async_calculator_and_still_closes_it() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestRunControlStuckCalculator" input_stream: "in"
               input_side_packet: "LOG:log" input_side_packet: "STARTED:started" }
        """
    )
    log: list[Event] = []
    started = asyncio.Event()
    await graph.start_run({"log": log, "started": started})
    await graph.add_packet("in", Packet(1, 7))
    await started.wait()
    graph.cancel()
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    assert "Graph run was cancelled." in caught.value.message
    assert log[:2] == [("process", 7), ("cancelled",)]
    assert len(log) == 3
    kind, timestamp, error = log[2]
    assert (kind, timestamp) == ("close", DONE)
    assert error is not None and "Graph run was cancelled." in error
    assert not graph.running
    graph.cancel()  # cancelling a finished run is harmless


async def test_cancel_before_anything_runs_ends_the_run() -> None:
    graph = Graph(TEXT)
    await graph.start_run({"fail_on": ""})
    graph.cancel()
    with pytest.raises(GraphRunError, match="cancelled"):
        await graph.wait_until_done()
    # The graph can be started again after a cancelled run.
    out: list[Any] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await one_run(graph, ["z"])
    assert out == [(0, "z")]


@register_calculator(name="TestRunControlBlockedThreadCalculator")
class BlockedThread(Calculator):
    """A worker-thread process() that waits for the test; close() checks it is not still running."""

    gate = InputSidePacket("GATE", dict)
    source: Input[Any] = Input("")

    def process(self, cc: CalculatorContext) -> None:
        gate = cc.input_side_packets[self.gate].payload
        gate["log"].append("process start")
        gate["started"].set()
        gate["go"].wait(5)
        gate["log"].append("process end")

    def close(self, cc: CalculatorContext) -> None:
        cc.input_side_packets[self.gate].payload["log"].append("close")


async def test_cancel_waits_for_a_running_worker_thread_call_before_closing() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestRunControlBlockedThreadCalculator" input_stream: "in"
               input_side_packet: "GATE:gate" }
        """
    )
    started, go = threading.Event(), threading.Event()
    log: list[str] = []
    await graph.start_run({"gate": {"started": started, "go": go, "log": log}})
    await graph.add_packet("in", Packet(1, 1))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    graph.cancel()
    done = asyncio.ensure_future(graph.wait_until_done())
    await asyncio.sleep(0)
    assert not done.done()  # the thread is still inside process()
    go.set()
    with pytest.raises(GraphRunError, match="cancelled"):
        await done
    # close() came only after process() returned: never concurrently.
    assert log == ["process start", "process end", "close"]
