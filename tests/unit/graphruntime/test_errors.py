"""Failures in open / process / close, in every execution mode, and StatusStop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorError,
    Graph,
    GraphRunError,
    Input,
    InputSidePacket,
    Output,
    Packet,
    PacketError,
    StatusStop,
    register_calculator,
)
from graphruntime.timestamp import DONE

Event = tuple[Any, ...]


class Planned:
    """Shared logic: PLAN = {"phase": ..., "at": timestamp, "error": exception}; LOG gets events."""

    plan = InputSidePacket("PLAN", dict)
    log = InputSidePacket("LOG", list)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    def _step(self, cc: CalculatorContext, phase: str) -> None:
        plan: dict[str, Any] = cc.input_side_packets["PLAN"].payload
        log: list[Event] = cc.input_side_packets["LOG"].payload
        error = cc.graph_error.message if cc.graph_error is not None else None
        log.append((cc.node_name, phase, int(cc.input_timestamp), error))
        if plan.get("phase") == phase and plan.get("at", int(cc.input_timestamp)) == int(
            cc.input_timestamp
        ):
            raise plan.get("error", RuntimeError("boom"))
        if phase == "process":
            cc.outputs[0].add_packet(cc.inputs[0])


@register_calculator(name="TestErrorsInlineCalculator")
class InlinePlanned(Planned, Calculator):
    blocking = False

    def open(self, cc: CalculatorContext) -> None:
        self._step(cc, "open")

    def process(self, cc: CalculatorContext) -> None:
        self._step(cc, "process")

    def close(self, cc: CalculatorContext) -> None:
        self._step(cc, "close")


@register_calculator(name="TestErrorsThreadCalculator")
class ThreadPlanned(InlinePlanned):
    blocking = True


@register_calculator(name="TestErrorsAsyncCalculator")
class AsyncPlanned(Planned, Calculator):
    async def open(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(0)
        self._step(cc, "open")

    async def process(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(0)
        self._step(cc, "process")

    async def close(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(0)
        self._step(cc, "close")


MODES = ["TestErrorsInlineCalculator", "TestErrorsThreadCalculator", "TestErrorsAsyncCalculator"]


def chain(first: str) -> str:
    """in -> first ("a") -> an inline node ("b") -> out."""
    return f"""
    input_stream: "in"
    node {{ name: "a" calculator: "{first}" input_stream: "in" output_stream: "mid"
           input_side_packet: "PLAN:plan" input_side_packet: "LOG:log" }}
    node {{ name: "b" calculator: "TestErrorsInlineCalculator" input_stream: "mid"
           output_stream: "out" input_side_packet: "PLAN:none" input_side_packet: "LOG:log" }}
    """


def phases(log: list[Event], node: str) -> list[str]:
    return [phase for name, phase, _, _ in log if name == node]


@pytest.mark.parametrize("calculator", MODES)
async def test_failing_open_skips_process_and_close_of_that_node(calculator: str) -> None:
    log: list[Event] = []
    graph = Graph(chain(calculator))
    with pytest.raises(GraphRunError) as caught:
        await graph.start_run({"plan": {"phase": "open"}, "none": {}, "log": log})
    assert 'Calculator::Open() for node "a" failed: boom' in caught.value.message
    assert caught.value.message.startswith("CalculatorGraph::Run() failed:")
    assert isinstance(caught.value.cause, RuntimeError)
    # Nodes open in topological order and the failure stops the rest from opening.
    assert phases(log, "a") == ["open"]
    assert phases(log, "b") == []
    assert not graph.running
    assert graph.has_error
    with pytest.raises(GraphRunError, match='node "a" failed'):
        await graph.wait_until_done()


async def test_failing_open_closes_nodes_opened_before_it() -> None:
    log: list[Event] = []
    graph = Graph(
        """
        input_stream: "in"
        node { name: "first" calculator: "TestErrorsInlineCalculator" input_stream: "in"
               output_stream: "mid" input_side_packet: "PLAN:none" input_side_packet: "LOG:log" }
        node { name: "second" calculator: "TestErrorsInlineCalculator" input_stream: "mid"
               output_stream: "out" input_side_packet: "PLAN:plan" input_side_packet: "LOG:log" }
        """
    )
    with pytest.raises(GraphRunError, match='Calculator::Open\\(\\) for node "second" failed'):
        await graph.start_run({"plan": {"phase": "open"}, "none": {}, "log": log})
    assert phases(log, "first") == ["open", "close"]
    assert phases(log, "second") == ["open"]
    close_error = next(e for n, p, _, e in log if n == "first" and p == "close")
    assert close_error is not None and 'node "second" failed: boom' in close_error


@pytest.mark.parametrize("calculator", MODES)
async def test_failing_process_fails_the_run_and_closes_opened_nodes(calculator: str) -> None:
    log: list[Event] = []
    graph = Graph(chain(calculator))
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(int(p.timestamp)))
    await graph.start_run({"plan": {"phase": "process", "at": 2}, "none": {}, "log": log})
    for t in range(5):
        try:
            await graph.add_packet("in", Packet(t, t))
        except GraphRunError:
            break  # the run already failed: add_packet says so
    graph.close_all_packet_sources()
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    message = caught.value.message
    assert message.startswith("CalculatorGraph::Run() failed:")
    assert 'Calculator::Process() for node "a" failed: boom' in message
    assert len(caught.value.errors) == 1
    error = caught.value.errors[0]
    assert isinstance(error, CalculatorError)
    assert (error.node, error.phase) == ("a", "Process")
    assert isinstance(caught.value.cause, RuntimeError)
    assert out == [0, 1]
    # Both nodes are closed, and their close() sees the run's error.
    assert phases(log, "a")[-1] == "close"
    assert phases(log, "b")[-1] == "close"
    for name in ("a", "b"):
        closing = [entry for entry in log if entry[0] == name and entry[1] == "close"]
        assert len(closing) == 1
        _, _, timestamp, graph_error = closing[0]
        assert timestamp == DONE
        assert graph_error is not None and 'node "a" failed: boom' in graph_error
    assert graph.has_error
    assert graph.error is not None and 'node "a" failed' in graph.error.message


@pytest.mark.parametrize("calculator", MODES)
async def test_failing_close_is_reported(calculator: str) -> None:
    log: list[Event] = []
    graph = Graph(chain(calculator))
    await graph.start_run({"plan": {"phase": "close"}, "none": {}, "log": log})
    await graph.add_packet("in", Packet(1, 1))
    graph.close_input_stream("in")
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    assert 'Calculator::Close() for node "a" failed: boom' in caught.value.message
    assert phases(log, "a") == ["open", "process", "close"]
    assert phases(log, "b")[-1] == "close"


async def test_add_packet_after_a_failure_raises_graph_has_errors() -> None:
    graph = Graph(chain("TestErrorsInlineCalculator"))
    await graph.start_run({"plan": {"phase": "process"}, "none": {}, "log": []})
    await graph.add_packet("in", Packet(0, 0))
    await graph.wait_until_idle()  # the failing node has run
    assert graph.has_error
    with pytest.raises(GraphRunError) as caught:
        await graph.add_packet("in", Packet(1, 1))
    assert caught.value.message.startswith("Graph has errors:")
    assert 'Calculator::Process() for node "a" failed: boom' in caught.value.message
    with pytest.raises(GraphRunError):
        await graph.wait_until_done()


async def test_error_message_uses_the_exception_text_or_its_type() -> None:
    graph = Graph(chain("TestErrorsInlineCalculator"))
    await graph.start_run(
        {"plan": {"phase": "process", "error": KeyError()}, "none": {}, "log": []}
    )
    await graph.add_packet("in", Packet(0, 0))
    graph.close_all_packet_sources()
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    assert caught.value.message.endswith('Calculator::Process() for node "a" failed: KeyError')


async def test_output_timestamp_error_in_a_calculator_fails_the_run() -> None:
    @register_calculator(name="TestErrorsBackwardsCalculator")
    class Backwards(Calculator):
        blocking = False
        source: Input[Any] = Input("")
        sink: Output[Any] = Output("")

        def process(self, cc: CalculatorContext) -> None:
            cc.outputs[self.sink].add("x", 100 - int(cc.input_timestamp))

    graph = Graph(
        """
        input_stream: "in"
        node { name: "back" calculator: "TestErrorsBackwardsCalculator" input_stream: "in"
               output_stream: "out" }
        """
    )
    await graph.start_run()
    await graph.add_packet("in", Packet(0, 1))
    await graph.add_packet("in", Packet(0, 2))
    graph.close_all_packet_sources()
    with pytest.raises(GraphRunError) as caught:
        await graph.wait_until_done()
    assert caught.value.message.endswith(
        'Calculator::Process() for node "back" failed: Packet timestamp mismatch on stream "out". '
        "Current minimum expected timestamp is 100 but received 98."
    )


@register_calculator(name="TestErrorsStopAtCalculator")
class StopAt(Calculator):
    """Forwards packets; raises StatusStop at the timestamp given by side packet AT."""

    blocking = False
    at = InputSidePacket("AT", int)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    def process(self, cc: CalculatorContext) -> None:
        if cc.input_timestamp == cc.input_side_packets[self.at].payload:
            raise StatusStop()
        cc.outputs[self.sink].add_packet(cc.inputs[self.source])


@register_calculator(name="TestErrorsStopAtThreadCalculator")
class StopAtThread(StopAt):
    blocking = True


@register_calculator(name="TestErrorsStopAtAsyncCalculator")
class StopAtAsync(StopAt):
    async def process(self, cc: CalculatorContext) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        StopAt.process(self, cc)


@register_calculator(name="TestErrorsEndlessSourceCalculator")
class EndlessSource(Calculator):
    """A source that never stops by itself (and naps, so it does not hog the loop)."""

    sink: Output[Any] = Output("")

    def open(self, cc: CalculatorContext) -> None:
        self.next = 0

    async def process(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(0.001)
        cc.outputs[self.sink].add(self.next, self.next)
        self.next += 1


@pytest.mark.parametrize(
    "calculator",
    [
        "TestErrorsStopAtCalculator",
        "TestErrorsStopAtThreadCalculator",
        "TestErrorsStopAtAsyncCalculator",
    ],
)
async def test_status_stop_from_a_non_source_closes_inputs_and_ends_the_run_politely(
    calculator: str,
) -> None:
    graph = Graph(
        f"""
        input_stream: "in"
        input_stream: "other"
        node {{ calculator: "{calculator}" input_side_packet: "AT:at"
               input_stream: "in" output_stream: "out" }}
        node {{ calculator: "PassThroughCalculator" input_stream: "other"
               output_stream: "other_out" }}
        node {{ calculator: "TestErrorsEndlessSourceCalculator" output_stream: "ticks" }}
        """
    )
    out: list[int] = []
    other: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(int(p.timestamp)))
    graph.observe_output_stream("other_out", lambda _, p: other.append(int(p.timestamp)))
    await graph.start_run({"at": 2})
    for t in range(4):
        await graph.add_packet("in", Packet(t, t))
    await graph.add_packet("other", Packet(0, 0))
    # The stop runs when the loop gets to the node; every graph input and source (the endless
    # one included) gets closed, so the run ends.
    await graph.wait_until_done()
    assert not graph.has_error
    # Packets queued before the stop still drained; 2 itself raised StatusStop.
    assert out == [0, 1, 3]
    assert other == [0]
    with pytest.raises(PacketError, match="closed"):
        await graph.add_packet("other", Packet(1, 1))
