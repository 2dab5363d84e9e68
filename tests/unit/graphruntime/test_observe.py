"""Watching runs: the observation seam, live statistics across runs, bounded memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from graphruntime import Graph, GraphRunError, Packet, calculator_function
from graphruntime.errors import GraphError
from graphruntime.observe import RunObserver
from graphruntime.scheduler import GraphRun
from graphruntime.stats import DURATION_WINDOW, RECENT_ERRORS, Durations, GraphStats, percentile


@calculator_function(inputs=["IN"], outputs=["OUT"], name="ObserveFailOnNegative")
def fail_on_negative(value: int) -> int:
    if value < 0:
        raise ValueError(f"negative input {value}")
    return value


RELEASE: asyncio.Event | None = None


@calculator_function(inputs=["IN"], outputs=["OUT"], name="ObserveWaitForRelease")
async def wait_for_release(value: int) -> int:
    assert RELEASE is not None
    await RELEASE.wait()
    return value


CHAIN = """
input_stream: "in"
output_stream: "out"
node { name: "first" calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid" }
node { name: "check" calculator: "ObserveFailOnNegative" input_stream: "IN:mid"
       output_stream: "OUT:out" }
"""


async def run_chain(graph: Graph, values: Sequence[int]) -> None:
    await graph.start_run()
    for timestamp, value in enumerate(values):
        await graph.add_packet("in", Packet(value, timestamp))
    graph.close_all_packet_sources()
    await graph.wait_until_done()


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0
    assert percentile([1, 2, 3, 4], 50) == 2


def test_durations_keep_totals_of_all_and_a_bounded_window() -> None:
    durations = Durations(window=10)
    for value in range(1000):
        durations.add(value)
    assert durations.count == 1000
    assert durations.total == sum(range(1000))
    assert durations.max == 999
    assert len(durations.recent) == 10
    assert durations.percentile(50) == 994  # of the last ten: 990..999


async def test_without_observers_a_run_has_none() -> None:
    graph = Graph(CHAIN)
    await run_chain(graph, [1, 2])
    assert graph._run is not None and graph._run.observer is None


async def test_stats_aggregate_calls_packets_and_streams_across_runs() -> None:
    graph = Graph(CHAIN)
    stats = GraphStats(graph.validated)
    graph.observers.append(stats)
    await run_chain(graph, [1, 2, 3])
    await run_chain(graph, [4, 5])
    snapshot = stats.snapshot()
    nodes = {node["name"]: node for node in snapshot["nodes"]}
    assert snapshot["runs"] == {"started": 2, "active": 0, "failed": 0, "cancelled": 0}
    for name in ("first", "check"):
        assert nodes[name]["calls"] == 5
        assert nodes[name]["packets_in"] == 5
        assert nodes[name]["packets_out"] == 5
        assert nodes[name]["errors"] == 0
        assert nodes[name]["latency_ms"]["p99"] >= nodes[name]["latency_ms"]["p50"] > 0
    streams = {stream["name"]: stream["packets"] for stream in snapshot["streams"]}
    assert streams == {"in": 5, "mid": 5, "out": 5}


async def test_stats_attribute_errors_to_their_node_and_keep_only_the_last_few() -> None:
    graph = Graph(CHAIN)
    stats = GraphStats(graph.validated)
    graph.observers.append(stats)
    for attempt in range(RECENT_ERRORS + 5):
        with pytest.raises(GraphRunError):
            await run_chain(graph, [1, -attempt - 1])
    snapshot = stats.snapshot()
    check = next(node for node in snapshot["nodes"] if node["name"] == "check")
    first = next(node for node in snapshot["nodes"] if node["name"] == "first")
    assert check["errors"] == RECENT_ERRORS + 5
    assert first["errors"] == 0
    assert len(check["recent_errors"]) == RECENT_ERRORS
    last = check["recent_errors"][-1]
    assert last["phase"] == "Process"
    assert f"negative input {-RECENT_ERRORS - 5}" in last["message"]
    assert snapshot["runs"]["failed"] == RECENT_ERRORS + 5


async def test_cancelled_runs_are_not_errors() -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    graph = Graph(
        """
        input_stream: "in"
        node { name: "wait" calculator: "ObserveWaitForRelease" input_stream: "IN:in"
               output_stream: "OUT:out" }
        """
    )
    stats = GraphStats(graph.validated)
    graph.observers.append(stats)
    await graph.start_run()
    await graph.add_packet("in", Packet(1, 0))
    await asyncio.sleep(0.01)
    graph.cancel()
    with pytest.raises(GraphRunError):
        await graph.wait_until_done()
    snapshot = stats.snapshot()
    assert snapshot["runs"]["cancelled"] == 1
    assert snapshot["runs"]["failed"] == 0
    assert snapshot["nodes"][0]["errors"] == 0


async def test_queue_depths_of_runs_in_flight_are_summed_and_forgotten_when_they_end() -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    config = """
        input_stream: "in"
        node { name: "wait" calculator: "ObserveWaitForRelease" input_stream: "IN:in"
               output_stream: "OUT:out" }
    """
    graphs = [Graph(config), Graph(config)]
    stats = GraphStats(graphs[0].validated)
    for graph in graphs:
        graph.observers.append(stats)
        await graph.start_run()
        for timestamp in range(3):
            await graph.add_packet("in", Packet(timestamp, timestamp))
    await asyncio.sleep(0.01)
    # Each run has one call waiting in process() and two packets queued behind it.
    assert stats.queue_depths() == [4]
    assert stats.snapshot()["runs"]["active"] == 2
    RELEASE.set()
    for graph in graphs:
        graph.close_all_packet_sources()
        await graph.wait_until_done()
    assert stats.queue_depths() == [0]
    assert stats.active_runs == 0


async def test_memory_stays_bounded_over_many_runs() -> None:
    graph = Graph(CHAIN)
    stats = GraphStats(graph.validated)
    graph.observers.append(stats)
    for _ in range(40):
        await run_chain(graph, list(range(50)))
    for node in stats.nodes:
        assert node.calls == 2000
        assert len(node.durations.recent) == DURATION_WINDOW
    assert stats.active_runs == 0
    assert len(stats._history) <= 12


class Recorder:
    """A GraphObserver that records everything it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def run_started(self, run: GraphRun) -> RunObserver:
        recorder = self

        class Observer:
            def process(
                self,
                node: int,
                timestamp: int,
                inputs: Sequence[Packet[Any]],
                start: int,
                end: int,
                error: BaseException | None,
            ) -> None:
                payloads = [p.payload for p in inputs if not p.is_empty()]
                assert end >= start
                recorder.calls.append(("process", (node, timestamp, payloads, error is None)))

            def lifecycle(
                self, node: int, phase: str, start: int, end: int, error: BaseException | None
            ) -> None:
                recorder.calls.append(("lifecycle", (node, phase)))

            def packet(self, stream: str, packet: Packet[Any]) -> None:
                recorder.calls.append(("packet", (stream, packet.payload)))

            def finished(self, errors: Sequence[GraphError]) -> None:
                recorder.calls.append(("finished", len(errors)))

        return Observer()


async def test_several_observers_each_see_every_event_in_order() -> None:
    first, second = Recorder(), Recorder()
    graph = Graph(CHAIN, observers=[first, second])
    await run_chain(graph, [7])
    assert first.calls == second.calls
    kinds = [kind for kind, _ in first.calls]
    assert kinds[0] == "lifecycle" and kinds[-1] == "finished"
    assert ("process", (0, 0, [7], True)) in first.calls
    assert ("process", (1, 0, [7], True)) in first.calls
    assert ("packet", ("mid", 7)) in first.calls
    assert {args for kind, args in first.calls if kind == "lifecycle"} == {
        (0, "Open"),
        (1, "Open"),
        (0, "Close"),
        (1, "Close"),
    }


class Failing:
    """A GraphObserver whose run observer raises on the first call."""

    def run_started(self, run: GraphRun) -> RunObserver:
        recorder = Recorder().run_started(run)

        class Observer:
            def __getattr__(self, name: str) -> Any:
                def fail(*args: Any) -> None:
                    raise RuntimeError(f"broken observer ({name})")

                return (
                    fail
                    if name in ("process", "lifecycle", "packet", "finished")
                    else getattr(recorder, name)
                )

        return Observer()


async def test_a_failing_observer_is_dropped_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    graph = Graph(CHAIN, observers=[Failing()])
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, packet: out.append(packet.payload))
    await run_chain(graph, [1, 2, 3])
    assert out == [1, 2, 3]
    assert graph._run is not None and graph._run.observer is None
    assert "graph observer failed" in caplog.text and "broken observer" in caplog.text


class Leaky:
    """A GraphObserver that keeps the runs in flight, like GraphStats, and raises on `failing`."""

    def __init__(self, failing: str = "") -> None:
        self.active: set[int] = set()
        self.finished = 0
        self.failing = failing

    def run_started(self, run: GraphRun) -> RunObserver:
        owner = self

        class Observer:
            def process(self, *args: Any) -> None:
                if owner.failing == "process":
                    raise RuntimeError("broken leaky observer (process)")

            def lifecycle(self, *args: Any) -> None:
                pass

            def packet(self, *args: Any) -> None:
                pass

            def finished(self, errors: Sequence[GraphError]) -> None:
                owner.active.discard(id(self))
                owner.finished += 1

        observer = Observer()
        self.active.add(id(observer))
        return observer


async def test_a_failing_observer_does_not_stop_the_fan_out_to_the_next_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    alone, fanned = Recorder(), Recorder()
    await run_chain(Graph(CHAIN, observers=[alone]), [7, 8])
    graph = Graph(CHAIN)
    stats = GraphStats(graph.validated)
    graph.observers.extend([Failing(), stats, fanned])
    await run_chain(graph, [7, 8])
    assert fanned.calls == alone.calls  # everything, though the one before it raised
    assert {stream["name"]: stream["packets"] for stream in stats.snapshot()["streams"]} == {
        "in": 2,
        "mid": 2,
        "out": 2,
    }
    assert stats.active_runs == 0 and stats.runs_started == 1
    failures = [r for r in caplog.records if "broken observer" in r.getMessage()]
    assert len(failures) == 1  # logged once, not on every call nor again at finished()


async def test_runs_ending_in_errors_do_not_leak_active_runs_behind_a_failing_observer() -> None:
    graph = Graph(CHAIN)
    stats = GraphStats(graph.validated)
    graph.observers.extend([stats, Failing()])
    for _ in range(3):
        with pytest.raises(GraphRunError):
            await run_chain(graph, [1, -1])
        await run_chain(graph, [1])
    assert stats.active_runs == 0
    assert stats.runs_started == 6 and stats.runs_failed == 3


async def test_a_single_observer_dropped_after_raising_is_still_told_the_run_finished() -> None:
    leaky = Leaky(failing="process")
    graph = Graph(CHAIN, observers=[leaky])
    with pytest.raises(GraphRunError):
        await run_chain(graph, [1, -1])
    assert leaky.active == set() and leaky.finished == 1


async def test_an_observer_failing_to_start_watching_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Refusing:
        def run_started(self, run: GraphRun) -> RunObserver:
            raise RuntimeError("cannot watch")

    leaky = Leaky()
    graph = Graph(CHAIN, observers=[leaky, Refusing()])
    await run_chain(graph, [1])
    assert leaky.active == set() and leaky.finished == 1
    assert "cannot watch" in caplog.text


async def test_the_observer_hears_of_the_end_even_when_finishing_is_cancelled() -> None:
    leaky = Leaky()
    graph = Graph(CHAIN, observers=[leaky])
    await graph.start_run()
    run = graph._run
    assert run is not None
    run.lifecycle.add(asyncio.get_running_loop().create_future())  # a close that never ends
    graph.close_all_packet_sources()
    while run.finish_task is None:
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    run.finish_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run.finish_task
    assert leaky.active == set() and leaky.finished == 1
