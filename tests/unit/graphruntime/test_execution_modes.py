"""Where hooks run: on the loop (async / non-blocking), on worker threads, several at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

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


class Probe:
    """Filled in by calculators; `ticks` is advanced by a ticker task on the event loop."""

    def __init__(self) -> None:
        self.ticks = 0
        self.threads: dict[str, int] = {}
        self.thread_names: list[str] = []
        self.ticks_during: list[int] = []


class ProbeUser:
    probe = InputSidePacket("PROBE", Probe)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    def _probe(self, cc: CalculatorContext) -> Probe:
        probe: Probe = cc.input_side_packets["PROBE"].payload
        return probe


@register_calculator(name="TestModesAsyncCalculator")
class AsyncCalc(ProbeUser, Calculator):
    async def open(self, cc: CalculatorContext) -> None:
        self._probe(cc).threads["open"] = threading.get_ident()

    async def process(self, cc: CalculatorContext) -> None:
        await asyncio.sleep(0)
        self._probe(cc).threads["process"] = threading.get_ident()
        cc.outputs[self.sink].add_packet(cc.inputs[self.source])

    async def close(self, cc: CalculatorContext) -> None:
        self._probe(cc).threads["close"] = threading.get_ident()


@register_calculator(name="TestModesSleepyCalculator")
class Sleepy(ProbeUser, Calculator):
    """Sync hooks that block; blocking = True (the default) sends them to a worker thread."""

    sleep_seconds = 0.2

    def open(self, cc: CalculatorContext) -> None:
        self._probe(cc).threads["open"] = threading.get_ident()

    def process(self, cc: CalculatorContext) -> None:
        probe = self._probe(cc)
        probe.threads["process"] = threading.get_ident()
        probe.thread_names.append(threading.current_thread().name)
        before = probe.ticks
        time.sleep(self.sleep_seconds)
        probe.ticks_during.append(probe.ticks - before)
        cc.outputs[self.sink].add_packet(cc.inputs[self.source])

    def close(self, cc: CalculatorContext) -> None:
        self._probe(cc).threads["close"] = threading.get_ident()


@register_calculator(name="TestModesInlineSleepyCalculator")
class InlineSleepy(Sleepy):
    blocking = False
    sleep_seconds = 0.05


def one_node(calculator: str, extra: str = "", graph_extra: str = "") -> str:
    return f"""
    {graph_extra}
    input_stream: "in"
    node {{ calculator: "{calculator}" input_stream: "in" output_stream: "out"
           input_side_packet: "PROBE:probe" {extra} }}
    """


async def run_with_ticker(text: str, probe: Probe, count: int = 1) -> list[Any]:
    graph = Graph(text)
    out: list[Any] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            probe.ticks += 1
            await asyncio.sleep(0.001)

    ticking = asyncio.ensure_future(ticker())
    try:
        await graph.start_run({"probe": probe})
        for t in range(count):
            await graph.add_packet("in", Packet(t, t))
        graph.close_all_packet_sources()
        await graph.wait_until_done()
    finally:
        stop.set()
        await ticking
    return out


async def test_async_hooks_run_on_the_event_loop_thread() -> None:
    probe = Probe()
    out = await run_with_ticker(one_node("TestModesAsyncCalculator"), probe, count=3)
    assert out == [0, 1, 2]
    loop_thread = threading.get_ident()
    assert probe.threads == {"open": loop_thread, "process": loop_thread, "close": loop_thread}


async def test_blocking_sync_calculator_runs_on_a_worker_and_the_loop_keeps_going() -> None:
    probe = Probe()
    out = await run_with_ticker(one_node("TestModesSleepyCalculator"), probe)
    assert out == [0]
    loop_thread = threading.get_ident()
    assert probe.threads["process"] != loop_thread
    assert probe.threads["open"] != loop_thread
    assert probe.threads["close"] != loop_thread
    # The ticker on the loop advanced while process() slept in its thread.
    assert probe.ticks_during[0] >= 5


async def test_non_blocking_sync_calculator_runs_inline_on_the_loop() -> None:
    probe = Probe()
    out = await run_with_ticker(one_node("TestModesInlineSleepyCalculator"), probe)
    assert out == [0]
    loop_thread = threading.get_ident()
    assert probe.threads == {"open": loop_thread, "process": loop_thread, "close": loop_thread}
    # Inline code holds the loop: the ticker could not move during the sleep.
    assert probe.ticks_during == [0]


async def test_application_thread_executor_runs_blocking_code_on_the_loop() -> None:
    probe = Probe()
    text = one_node(
        "TestModesInlineSleepyCalculator",
        extra='executor: "app"',
        graph_extra='executor { name: "app" type: "ApplicationThreadExecutor" }',
    )
    await run_with_ticker(text, probe)
    assert probe.threads["process"] == threading.get_ident()


async def test_named_thread_pool_executor_is_used() -> None:
    probe = Probe()
    text = one_node(
        "TestModesSleepyCalculator",
        extra='executor: "heavy"',
        graph_extra="""executor {
          name: "heavy"
          type: "ThreadPoolExecutor"
          options {
            [mediapipe.ThreadPoolExecutorOptions.ext] {
              num_threads: 1 thread_name_prefix: "tmheavy"
            }
          }
        }""",
    )
    Sleepy.sleep_seconds, saved = 0.0, Sleepy.sleep_seconds
    try:
        await run_with_ticker(text, probe, count=2)
    finally:
        Sleepy.sleep_seconds = saved
    assert probe.thread_names and all(name.startswith("tmheavy") for name in probe.thread_names)


@register_calculator(name="TestModesParallelAsyncCalculator")
class ParallelAsync(Calculator):
    """Each call reports itself on STARTED, waits for its own event in RELEASE, emits, and
    reports its end on FINISHED."""

    started = InputSidePacket("STARTED", asyncio.Queue)
    finished = InputSidePacket("FINISHED", asyncio.Queue)
    release = InputSidePacket("RELEASE", dict)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    async def process(self, cc: CalculatorContext) -> None:
        timestamp = int(cc.input_timestamp)
        cc.input_side_packets[self.started].payload.put_nowait(timestamp)
        await cc.input_side_packets[self.release].payload[timestamp].wait()
        cc.outputs[self.sink].add(f"r{timestamp}")
        cc.input_side_packets[self.finished].payload.put_nowait(timestamp)


@register_calculator(name="TestModesParallelAsyncOffsetCalculator")
class ParallelAsyncOffset(ParallelAsync):
    """The same with a timestamp offset: bounds must not overtake buffered earlier outputs."""

    timestamp_offset = 0


@pytest.mark.parametrize(
    "calculator", ["TestModesParallelAsyncCalculator", "TestModesParallelAsyncOffsetCalculator"]
)
async def test_max_in_flight_runs_async_calls_concurrently_and_keeps_output_order(
    calculator: str,
) -> None:
    graph = Graph(
        f"""
        input_stream: "in"
        node {{ calculator: "{calculator}" input_stream: "in"
               output_stream: "out" max_in_flight: 4
               input_side_packet: "STARTED:started" input_side_packet: "RELEASE:release"
               input_side_packet: "FINISHED:finished" }}
        """
    )
    started: asyncio.Queue[int] = asyncio.Queue()
    finished: asyncio.Queue[int] = asyncio.Queue()
    release = {t: asyncio.Event() for t in range(4)}
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, int(p.timestamp))))
    await graph.start_run({"started": started, "release": release, "finished": finished})
    for t in range(4):
        await graph.add_packet("in", Packet(t, t))
    # All four calls are in flight at once (none has been released yet).
    assert sorted([await started.get() for _ in range(4)]) == [0, 1, 2, 3]
    for t in (3, 2, 1):
        release[t].set()
        assert await finished.get() == t
    # Later timestamps finished first, but their outputs wait for timestamp 0.
    assert out == []
    release[0].set()
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [("r0", 0), ("r1", 1), ("r2", 2), ("r3", 3)]


@register_calculator(name="TestModesParallelThreadCalculator")
class ParallelThread(Calculator):
    """Blocking calls that meet at a barrier: they can only all return if they run together."""

    barrier = InputSidePacket("BARRIER", threading.Barrier)
    source: Input[Any] = Input("")
    sink: Output[Any] = Output("")

    def process(self, cc: CalculatorContext) -> None:
        timestamp = int(cc.input_timestamp)
        cc.input_side_packets[self.barrier].payload.wait()
        time.sleep(0.01 * (3 - timestamp))  # later timestamps finish first
        cc.outputs[self.sink].add(timestamp * 10)


async def test_max_in_flight_runs_thread_calls_concurrently_and_keeps_output_order() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestModesParallelThreadCalculator" input_stream: "in"
               output_stream: "out" max_in_flight: 3 input_side_packet: "BARRIER:barrier" }
        """
    )
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run({"barrier": threading.Barrier(3, timeout=5)})
    for t in range(3):
        await graph.add_packet("in", Packet(t, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()  # a BrokenBarrierError (calls not concurrent) would fail it
    assert out == [0, 10, 20]


async def test_max_in_flight_on_a_non_blocking_sync_calculator() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid"
               max_in_flight: 3 }
        node { calculator: "TestModesAsyncCalculator" input_stream: "mid" output_stream: "out"
               input_side_packet: "PROBE:probe" }
        """
    )
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run({"probe": Probe()})
    for t in range(10):
        await graph.add_packet("in", Packet(t, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == list(range(10))
