"""Input stream handlers: when process() runs and which packets it sees."""

from __future__ import annotations

from typing import Any

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    Graph,
    InputSidePacket,
    Packet,
    register_calculator,
)
from graphruntime.stream_handlers import DefaultInputStreamHandler
from graphruntime.streams import InputStream
from graphruntime.tags import TagMap
from graphruntime.timestamp import DONE

Call = tuple[Any, ...]


@register_calculator(name="TestHandlersRecorderCalculator")
class Recorder(Calculator):
    """Logs (input timestamp, payloads by flat id) per process() and ("close",) at close()."""

    blocking = False
    log = InputSidePacket("LOG", list)

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        super().get_contract(cc)
        cc.inputs.declare_all()
        cc.outputs.declare_all()

    def process(self, cc: CalculatorContext) -> None:
        payloads = tuple(None if p.is_empty() else p.payload for p in cc.inputs)
        cc.input_side_packets[self.log].payload.append((int(cc.input_timestamp), payloads))

    def close(self, cc: CalculatorContext) -> None:
        cc.input_side_packets[self.log].payload.append(("close", int(cc.input_timestamp)))


def recorder_graph(inputs: list[str], handler: str = "", options: str = "") -> str:
    streams = "".join(f'input_stream: "{name}"\n' for name in inputs)
    tags = "ABCD"[: len(inputs)]
    ports = "".join(f'  input_stream: "{t}:{n}"\n' for t, n in zip(tags, inputs, strict=True))
    handler_block = (
        f'  input_stream_handler {{ input_stream_handler: "{handler}" {options} }}\n'
        if handler
        else ""
    )
    return (
        streams
        + 'node {\n  calculator: "TestHandlersRecorderCalculator"\n'
        + '  input_side_packet: "LOG:log"\n'
        + ports
        + handler_block
        + "}\n"
    )


async def started(text: str, log: list[Call]) -> Graph:
    graph = Graph(text)
    await graph.start_run({"log": log})
    return graph


# ----------------------------------------------------------------------------------- default


async def test_default_processes_a_timestamp_only_once_it_is_settled_on_every_input() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"]), log)
    await graph.add_packet("a", Packet("a1", 1))
    await graph.add_packet("a", Packet("a2", 2))
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    # 2 is not settled on b (its bound is 2), so only 1 ran, with both packets together.
    assert log == [(1, ("a1", "b1"))]

    await graph.add_packet("b", Packet("b3", 3))
    await graph.wait_until_idle()
    # b's bound passed 2: 2 runs with b empty; 3 still waits for a.
    assert log[1:] == [(2, ("a2", None))]

    graph.close_input_stream("a")
    await graph.wait_until_idle()
    assert log[2:] == [(3, (None, "b3"))]

    graph.close_input_stream("b")
    await graph.wait_until_done()
    assert log[3:] == [("close", DONE)]


async def test_default_drops_nothing_and_keeps_timestamp_order() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"]), log)
    for t in range(0, 20, 2):
        await graph.add_packet("a", Packet(t, t))
    for t in range(1, 20, 2):
        await graph.add_packet("b", Packet(t, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    calls = log[:-1]
    assert [t for t, _ in calls] == list(range(20))
    assert all(payloads == ((t, None) if t % 2 == 0 else (None, t)) for t, payloads in calls)
    assert log[-1] == ("close", DONE)


async def test_default_waits_for_an_input_that_never_moves() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"]), log)
    for t in range(3):
        await graph.add_packet("a", Packet(t, t))
    await graph.wait_until_idle()
    assert log == []
    graph.set_input_stream_timestamp_bound("b", 2)
    await graph.wait_until_idle()
    assert log == [(0, (0, None)), (1, (1, None))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log[2:] == [(2, (2, None)), ("close", DONE)]


# --------------------------------------------------------------------------------- immediate


async def test_immediate_runs_per_stream_and_timestamps_may_go_backwards() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"], "ImmediateInputStreamHandler"), log)
    await graph.add_packet("a", Packet("a5", 5))
    await graph.wait_until_idle()
    # b has not moved at all, yet a's packet is processed at once.
    assert log == [(5, ("a5", None))]
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    assert log[1:] == [(1, (None, "b1"))]


async def test_immediate_makes_one_extra_call_when_a_stream_becomes_done() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"], "ImmediateInputStreamHandler"), log)
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    graph.close_input_stream("a")
    await graph.wait_until_idle()
    # a became done while b is still open: process() with empty inputs at b's settled bound.
    assert log == [(1, (None, "b1")), (2, (None, None))]
    graph.close_input_stream("b")
    await graph.wait_until_done()
    # The last stream to finish closes the node without another empty call.
    assert log[2:] == [("close", DONE)]


async def test_immediate_same_timestamp_on_both_streams_is_delivered_together() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"], "ImmediateInputStreamHandler"), log)
    await graph.add_packet("a", Packet("a3", 3))
    await graph.add_packet("b", Packet("b3", 3))
    await graph.wait_until_idle()
    assert log == [(3, ("a3", "b3"))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


# ---------------------------------------------------------------------------------- sync set

SYNC_SETS = """options {
    [mediapipe.SyncSetInputStreamHandlerOptions.ext] { sync_set { tag_index: "A" } }
}"""


async def test_sync_set_synchronizes_each_set_on_its_own() -> None:
    log: list[Call] = []
    text = recorder_graph(["a", "b", "c"], "SyncSetInputStreamHandler", SYNC_SETS)
    graph = await started(text, log)
    await graph.add_packet("a", Packet("a5", 5))
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    # {A} is ready at 5; {B, C} (the implicit set of the rest) waits for C at 1.
    assert log == [(5, ("a5", None, None))]
    await graph.add_packet("c", Packet("c1", 1))
    await graph.wait_until_idle()
    # One set per call; the timestamp jumps back to the other set's.
    assert log[1:] == [(1, (None, "b1", "c1"))]
    await graph.add_packet("a", Packet("a6", 6))
    await graph.add_packet("b", Packet("b6", 6))
    await graph.add_packet("c", Packet("c6", 6))
    await graph.wait_until_idle()
    # Both sets ready at 6: still one set per call.
    assert log[2:] == [(6, ("a6", None, None)), (6, (None, "b6", "c6"))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log[-1] == ("close", DONE)


async def test_sync_set_closes_only_when_every_set_is_done() -> None:
    log: list[Call] = []
    text = recorder_graph(["a", "b", "c"], "SyncSetInputStreamHandler", SYNC_SETS)
    graph = await started(text, log)
    graph.close_input_stream("a")
    await graph.wait_until_idle()
    assert log == []
    await graph.add_packet("b", Packet("b1", 1))
    await graph.add_packet("c", Packet("c1", 1))
    graph.close_input_stream("b")
    graph.close_input_stream("c")
    await graph.wait_until_done()
    assert log == [(1, (None, "b1", "c1")), ("close", DONE)]


# -------------------------------------------------------------------------------- fixed size


async def test_fixed_size_keeps_only_the_newest_packet_by_default() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a"], "FixedSizeInputStreamHandler"), log)
    # No await yields between these adds, so the node sees all five queued at once.
    for t in range(5):
        await graph.add_packet("a", Packet(t, t))
    await graph.wait_until_idle()
    assert log == [(4, (4,))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    assert log[1:] == [("close", DONE)]


async def test_fixed_size_honours_trigger_and_target_and_drops_on_every_stream() -> None:
    log: list[Call] = []
    options = """options {
        [mediapipe.FixedSizeInputStreamHandlerOptions.ext] {
          trigger_queue_size: 3 target_queue_size: 2
        }
    }"""
    graph = await started(recorder_graph(["a", "b"], "FixedSizeInputStreamHandler", options), log)
    for t in range(6):
        await graph.add_packet("a", Packet(f"a{t}", t))
        await graph.add_packet("b", Packet(f"b{t}", t))
    await graph.wait_until_idle()
    # Newest two timestamps kept; the same timestamps dropped on both streams.
    assert log == [(4, ("a4", "b4")), (5, ("a5", "b5"))]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_fixed_size_passes_everything_when_the_node_keeps_up() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a"], "FixedSizeInputStreamHandler"), log)
    for t in range(4):
        await graph.add_packet("a", Packet(t, t))
        await graph.wait_until_idle()
    assert [entry[0] for entry in log] == [0, 1, 2, 3]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


# ----------------------------------------------------------------------------------- barrier


async def test_barrier_waits_for_a_packet_on_every_stream_whatever_the_timestamps() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"], "BarrierInputStreamHandler"), log)
    await graph.add_packet("a", Packet("a1", 1))
    await graph.add_packet("a", Packet("a2", 2))
    await graph.wait_until_idle()
    assert log == []
    await graph.add_packet("b", Packet("b10", 10))
    await graph.wait_until_idle()
    assert [payloads for _, payloads in log] == [("a1", "b10")]
    await graph.add_packet("b", Packet("b11", 11))
    await graph.wait_until_idle()
    assert [payloads for _, payloads in log[1:]] == [("a2", "b11")]
    # Barrier closes as soon as any stream is done.
    graph.close_input_stream("a")
    await graph.wait_until_idle()
    assert log[2:] == [("close", DONE)]
    graph.close_input_stream("b")
    await graph.wait_until_done()


# ------------------------------------------------------------------------------- early close


async def test_early_close_closes_when_any_input_is_done() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"], "EarlyCloseInputStreamHandler"), log)
    await graph.add_packet("a", Packet("a1", 1))
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    assert log == [(1, ("a1", "b1"))]
    graph.close_input_stream("a")
    await graph.wait_until_idle()
    assert log[1:] == [("close", DONE)]
    graph.close_input_stream("b")
    await graph.wait_until_done()


async def test_default_does_not_close_until_every_input_is_done() -> None:
    log: list[Call] = []
    graph = await started(recorder_graph(["a", "b"]), log)
    graph.close_input_stream("a")
    await graph.wait_until_idle()
    assert log == []
    graph.close_input_stream("b")
    await graph.wait_until_done()
    assert log == [("close", DONE)]


# -------------------------------------------------------------------------------------- mux


async def test_mux_forwards_the_selected_input_and_drops_the_rest() -> None:
    graph = Graph(
        """
        input_stream: "a"
        input_stream: "b"
        input_stream: "select"
        node {
          calculator: "MuxCalculator"
          input_stream: "INPUT:0:a"
          input_stream: "INPUT:1:b"
          input_stream: "SELECT:select"
          output_stream: "OUTPUT:out"
        }
        """
    )
    out: list[tuple[Any, int]] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, int(p.timestamp))))
    await graph.start_run()
    await graph.add_packet("select", Packet(1, 1))
    await graph.wait_until_idle()
    assert out == []  # b has not reached 1 yet; a is irrelevant
    await graph.add_packet("b", Packet("b1", 1))
    await graph.wait_until_idle()
    assert out == [("b1", 1)]
    # Only SELECT and the chosen stream matter: a never needs a packet at 2.
    await graph.add_packet("b", Packet("b2", 2))
    await graph.add_packet("select", Packet(0, 3))
    await graph.add_packet("a", Packet("a3", 3))
    await graph.wait_until_idle()
    assert out == [("b1", 1), ("a3", 3)]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


def test_only_the_default_handler_itself_lets_the_pump_pop_its_queue() -> None:
    """GraphRun._step_fifo bypasses the handler's calls: a subclass keeps them."""

    class Custom(DefaultInputStreamHandler):
        def readiness(self) -> int:
            return super().readiness()

    stream = InputStream("in", None, 0, False, lambda *_: None)  # type: ignore[arg-type]
    tags = TagMap.from_specs(["in"])
    assert DefaultInputStreamHandler([stream], tags, None, False).fifo is stream
    assert DefaultInputStreamHandler([stream], tags, None, True).fifo is None
    assert Custom([stream], tags, None, False).fifo is None
