"""API misuse raises at the call, with a message saying what to do (Graph and CalculatorGraph)."""

from __future__ import annotations

from typing import Any

import pytest

from graphruntime import (
    CalculatorGraph,
    Graph,
    GraphUsageError,
    Packet,
    PacketError,
    Timestamp,
)

GRAPH = """
input_stream: "in"
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out" }
"""


def ignore(_: str, __: Packet[Any]) -> None:
    return None


# -------------------------------------------------------------------------------------- Graph


async def test_add_before_start_run() -> None:
    graph = Graph(GRAPH)
    with pytest.raises(GraphUsageError, match=r"not running; call start_run\(\) first"):
        await graph.add_packet("in", Packet(1, 0))
    with pytest.raises(GraphUsageError):
        graph.close_input_stream("in")
    with pytest.raises(GraphUsageError):
        await graph.wait_until_done()


async def test_packet_to_unknown_stream() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    with pytest.raises(GraphUsageError) as caught:
        await graph.add_packet("nope", Packet(1, 0))
    assert str(caught.value) == (
        'Graph has no input stream named "nope" (graph input streams: "in").'
    )
    # An internal stream is not a graph input either.
    with pytest.raises(GraphUsageError, match='no input stream named "out"'):
        await graph.add_packet("out", Packet(1, 0))
    with pytest.raises(GraphUsageError, match='no input stream named "nope"'):
        graph.close_input_stream("nope")
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_packet_to_closed_stream() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    await graph.add_packet("in", Packet(1, 0))
    graph.close_input_stream("in")
    graph.close_input_stream("in")  # idempotent, as MediaPipe's
    with pytest.raises(PacketError) as caught:
        await graph.add_packet("in", Packet(2, 1))
    assert str(caught.value) == (
        'Graph input stream "in" is closed; no packet can be added after close_input_stream().'
    )
    await graph.wait_until_done()


@pytest.mark.parametrize("second", [5, 4])
async def test_non_increasing_timestamp(second: int) -> None:
    graph = Graph(GRAPH)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    await graph.start_run()
    await graph.add_packet("in", Packet(1, 5))
    with pytest.raises(PacketError) as caught:
        await graph.add_packet("in", Packet(2, second))
    assert str(caught.value) == (
        'Packet timestamp mismatch on graph input stream "in". Current minimum expected '
        f"timestamp is 6 but received {second}. Timestamps must strictly increase on each stream."
    )
    # The refused packet did not poison the run.
    await graph.add_packet("in", Packet(3, 6))
    graph.close_input_stream("in")
    await graph.wait_until_done()
    assert out == [1, 3]


async def test_timestamps_not_allowed_in_a_stream() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    for bad in (Timestamp.UNSET, Timestamp.UNSTARTED, Timestamp.DONE):
        with pytest.raises(PacketError, match="not allowed in a stream"):
            await graph.add_packet("in", Packet(1, bad))
    with pytest.raises(PacketError, match="needs a Packet or a payload with a timestamp"):
        await graph.add_packet("in", "payload")
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_nothing_may_follow_a_prestream_packet() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    await graph.add_packet("in", Packet("summary", Timestamp.PRESTREAM))
    with pytest.raises(PacketError, match=r"Timestamp\.ONE_OVER_POSTSTREAM but received 0"):
        await graph.add_packet("in", Packet(1, 0))
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_poststream_packet_must_be_alone() -> None:
    graph = Graph(GRAPH)
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, p.timestamp)))
    await graph.start_run()
    await graph.add_packet("in", Packet("a", 0))
    with pytest.raises(PacketError) as caught:
        await graph.add_packet("in", Packet("summary", Timestamp.POSTSTREAM))
    assert str(caught.value) == (
        'In stream "in", a packet at Timestamp.POSTSTREAM must be the only packet in the stream.'
    )
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    # Alone, it is fine (and nothing may follow it).
    await graph.start_run()
    await graph.add_packet("in", Packet("summary", Timestamp.POSTSTREAM))
    with pytest.raises(PacketError):
        await graph.add_packet("in", Packet("late", Timestamp.POSTSTREAM))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [("a", 0), ("summary", Timestamp.POSTSTREAM)]


async def test_payload_and_timestamp_form_of_add_packet() -> None:
    graph = Graph(GRAPH)
    out: list[tuple[str, int]] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, int(p.timestamp))))
    await graph.start_run()
    await graph.add_packet("in", "a", 3)
    await graph.add_packet("in", Packet("b", 0), 4)  # a packet restamped
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert out == [("a", 3), ("b", 4)]


async def test_input_bound_may_not_go_backwards() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    await graph.add_packet("in", Packet(1, 10))
    with pytest.raises(PacketError, match="below its current bound 11"):
        graph.set_input_stream_timestamp_bound("in", 5)
    graph.set_input_stream_timestamp_bound("in", 20)
    with pytest.raises(PacketError, match="expected timestamp is 20 but received 15"):
        await graph.add_packet("in", Packet(2, 15))
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_observer_after_start_run() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    with pytest.raises(GraphUsageError) as caught:
        graph.observe_output_stream("out", ignore)
    assert str(caught.value) == (
        'Cannot observe "out" while the graph is running; add observers before start_run().'
    )
    with pytest.raises(GraphUsageError):
        graph.poll_output_stream("out")
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    graph.observe_output_stream("out", ignore)  # fine again once the run is over


async def test_observing_an_unknown_stream() -> None:
    graph = Graph(GRAPH)
    with pytest.raises(GraphUsageError) as caught:
        graph.observe_output_stream("nope", ignore)
    assert str(caught.value) == 'Graph has no stream named "nope" (streams: in, out).'


async def test_start_twice() -> None:
    graph = Graph(GRAPH)
    await graph.start_run()
    with pytest.raises(GraphUsageError) as caught:
        await graph.start_run()
    assert str(caught.value) == (
        "The graph is already running; call wait_until_done() before start_run()."
    )
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_run_refuses_graphs_with_input_streams() -> None:
    graph = Graph(GRAPH)
    with pytest.raises(GraphUsageError, match=r"call start_run\(\) instead of run\(\)"):
        await graph.run()
    assert not graph.running


# ---------------------------------------------------------------------------- CalculatorGraph


def test_sync_add_before_start_run() -> None:
    graph = CalculatorGraph(GRAPH)
    with pytest.raises(GraphUsageError) as caught:
        graph.add_packet_to_input_stream("in", Packet(1, 0))
    assert str(caught.value) == (
        "CalculatorGraph.add_packet_to_input_stream() is called before start_run()."
    )
    with pytest.raises(GraphUsageError):
        graph.close_input_stream("in")
    with pytest.raises(GraphUsageError):
        graph.wait_until_done()


def test_sync_unknown_stream_closed_stream_and_bad_timestamps() -> None:
    graph = CalculatorGraph(GRAPH)
    out: list[int] = []
    graph.observe_output_stream("out", lambda _, p: out.append(p.payload))
    graph.start_run()
    with pytest.raises(GraphUsageError, match='Graph has no input stream named "nope"'):
        graph.add_packet_to_input_stream("nope", Packet(1, 0))
    graph.add_packet_to_input_stream("in", Packet(1, 5))
    with pytest.raises(PacketError) as caught:
        graph.add_packet_to_input_stream("in", Packet(2, 5))
    assert str(caught.value) == (
        'Packet timestamp mismatch on graph input stream "in". Current minimum expected '
        "timestamp is 6 but received 5. Timestamps must strictly increase on each stream."
    )
    with pytest.raises(PacketError, match=r"received Timestamp\.UNSET"):
        graph.add_packet_to_input_stream("in", Packet(2))
    with pytest.raises(PacketError, match="needs a Packet or a timestamp"):
        graph.add_packet_to_input_stream("in", 2)
    with pytest.raises(PacketError, match="must be the only packet in the stream"):
        graph.add_packet_to_input_stream("in", Packet(2, Timestamp.POSTSTREAM))
    graph.add_packet_to_input_stream("in", 3, timestamp=7)
    graph.close_input_stream("in")
    with pytest.raises(PacketError, match='Graph input stream "in" is closed'):
        graph.add_packet_to_input_stream("in", Packet(4, 8))
    with pytest.raises(GraphUsageError, match='no input stream named "nope"'):
        graph.close_input_stream("nope")
    graph.wait_until_done()
    assert out == [1, 3]


def test_sync_observer_after_start_and_start_twice() -> None:
    graph = CalculatorGraph(GRAPH)
    graph.start_run()
    with pytest.raises(GraphUsageError, match="add observers before start_run"):
        graph.observe_output_stream("out", ignore)
    with pytest.raises(GraphUsageError, match="already running"):
        graph.start_run()
    graph.close()
    assert not graph.has_error()


def test_sync_blocking_call_from_a_callback_is_refused() -> None:
    graph = CalculatorGraph(GRAPH)
    problems: list[BaseException] = []

    def callback(_: str, __: Packet[Any]) -> None:
        try:
            graph.wait_until_idle()
        except GraphUsageError as error:
            problems.append(error)

    graph.observe_output_stream("out", callback)
    graph.start_run()
    graph.add_packet_to_input_stream("in", Packet(1, 0))
    graph.close()
    assert len(problems) == 1
    assert "would deadlock" in str(problems[0])
