"""`Graph`: run a validated graph on the current asyncio event loop.

This is the API the server uses: everything is called on the loop that runs the graph, `add_packet`
awaits only when the graph is throttled, and outputs arrive through callbacks or async iterators.
The same `Graph` can be run again after a run ends, and one `ValidatedGraph` can back many `Graph`
objects running at once. For plain synchronous code, `CalculatorGraph` wraps this on a background
loop with MediaPipe's method names.

Misuse raises at the call, with a message that says what to do: an unknown stream, a packet after
`close_input_stream`, a timestamp that does not increase, an observer added after `start_run`.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from graphruntime._proto import calculator_pb2
from graphruntime.config import GraphConfig
from graphruntime.errors import GraphError, GraphRunError, GraphUsageError, PacketError
from graphruntime.node_runtime import GraphInputStream
from graphruntime.observe import GraphObserver
from graphruntime.packet import Packet
from graphruntime.profiler import GraphProfiler
from graphruntime.scheduler import BoundObserver, GraphRun, StreamObserver
from graphruntime.services import GraphService
from graphruntime.timestamp import DONE, POSTSTREAM, PRESTREAM, describe, previous_allowed_in_stream
from graphruntime.validation import ValidatedGraph


class AddMode(enum.Enum):
    """What `add_packet` does when the graph is throttled (MediaPipe's GraphInputStreamAddMode)."""

    WAIT_TILL_NOT_FULL = "wait"
    ADD_IF_NOT_FULL = "fail"


class GraphThrottledError(GraphError):
    """`add_packet` in ADD_IF_NOT_FULL mode found the graph throttled."""


def check_input_timestamp(stream: GraphInputStream, timestamp: int) -> None:
    """Raise `PacketError` now for a packet the stream cannot accept (MediaPipe fails later)."""
    bound = stream.output.bound
    if stream.closed or bound == DONE:
        raise PacketError(
            f'Graph input stream "{stream.name}" is closed; no packet can be added after '
            "close_input_stream()."
        )
    if not PRESTREAM <= timestamp <= POSTSTREAM:
        raise PacketError(
            f'Packet for graph input stream "{stream.name}" has timestamp {describe(timestamp)}, '
            "which is not allowed in a stream; give each packet a timestamp."
        )
    if timestamp < bound:
        raise PacketError(
            f'Packet timestamp mismatch on graph input stream "{stream.name}". Current minimum '
            f"expected timestamp is {describe(bound)} but received {describe(timestamp)}. "
            "Timestamps must strictly increase on each stream."
        )
    if timestamp == POSTSTREAM and bound > PRESTREAM:
        raise PacketError(poststream_not_alone(stream.name))


def poststream_not_alone(stream: str) -> str:
    return (
        f'In stream "{stream}", a packet at {describe(POSTSTREAM)} must be the only packet in the '
        "stream."
    )


class OutputStreamPoller:
    """Async iterator over the packets of one stream during one run.

    It ends when the stream closes or the run ends, and raises the run's error if the run failed.
    """

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._packets: deque[Packet[Any]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_packet(self, _stream: str, packet: Packet[Any]) -> None:
        self._packets.append(packet)
        self._wake()

    def _on_bound(self, _stream: str, bound: int) -> None:
        if bound == DONE:
            self._end(None)

    def _end(self, error: BaseException | None) -> None:
        if not self._ended:
            self._ended = True
            self._error = error
            self._wake()

    def __aiter__(self) -> AsyncIterator[Packet[Any]]:
        return self

    async def __anext__(self) -> Packet[Any]:
        while not self._packets:
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        return self._packets.popleft()


class Graph:
    """See the module docstring."""

    def __init__(
        self,
        graph: ValidatedGraph | GraphConfig | calculator_pb2.CalculatorGraphConfig | str,
        *,
        add_mode: AddMode = AddMode.WAIT_TILL_NOT_FULL,
        services: Mapping[GraphService[Any], Any] | None = None,
        observers: Sequence[GraphObserver] = (),
        profiler: GraphProfiler | None = None,
    ) -> None:
        """`observers` watch every run (see graphruntime.observe). `profiler` is the one to use;
        without it, one is made when the graph's profiler_config turns profiling on, and it
        gathers every run of this Graph object (as MediaPipe's CalculatorGraph does)."""
        self.validated = (
            graph if isinstance(graph, ValidatedGraph) else ValidatedGraph.from_config(graph)
        )
        self.add_mode = add_mode
        self.services = dict(services or {})
        self.profiler = profiler or GraphProfiler.from_config(self.validated)
        self.observers: list[GraphObserver] = list(observers)
        if self.profiler is not None and self.profiler not in self.observers:
            self.observers.append(self.profiler)
        self._observers: dict[str, list[StreamObserver]] = {}
        self._bound_observers: dict[str, list[BoundObserver]] = {}
        self._pollers: list[OutputStreamPoller] = []
        self._run: GraphRun | None = None

    # --------------------------------------------------------------------------------- outputs

    def _check_observable(self, stream: str) -> None:
        if self._run is not None and not self._run.finished.is_set():
            raise GraphUsageError(
                f'Cannot observe "{stream}" while the graph is running; add observers before '
                "start_run()."
            )
        if stream not in self.validated.producers:
            known = ", ".join(sorted(self.validated.producers)) or "none"
            raise GraphUsageError(f'Graph has no stream named "{stream}" (streams: {known}).')

    def observe_output_stream(
        self,
        stream: str,
        callback: Callable[[str, Packet[Any]], None],
        *,
        observe_timestamp_bounds: bool = False,
    ) -> None:
        """Call `callback(stream_name, packet)` for every packet on `stream`, on the loop.

        With `observe_timestamp_bounds`, bound changes are reported too, as empty packets at the
        last settled timestamp. Applies to every later run.
        """
        self._check_observable(stream)
        self._observers.setdefault(stream, []).append(callback)
        if observe_timestamp_bounds:

            def on_bound(name: str, bound: int) -> None:
                # As MediaPipe's OutputStreamObserver: closing (bound Done) is not a bound report.
                if bound < DONE:
                    callback(name, Packet.empty(previous_allowed_in_stream(bound)))

            self._bound_observers.setdefault(stream, []).append(on_bound)

    def poll_output_stream(self, stream: str) -> OutputStreamPoller:
        """An async iterator over the packets of `stream` in the next run."""
        self._check_observable(stream)
        poller = OutputStreamPoller(stream)
        self._pollers.append(poller)
        return poller

    # ----------------------------------------------------------------------------- run control

    @property
    def running(self) -> bool:
        return self._run is not None and not self._run.finished.is_set()

    def _active_run(self) -> GraphRun:
        if self._run is None:
            raise GraphUsageError("The graph is not running; call start_run() first.")
        return self._run

    async def start_run(self, input_side_packets: Mapping[str, Any] | None = None) -> None:
        """Open every node and start accepting packets; side packets are values or Packets."""
        if self.running:
            raise GraphUsageError(
                "The graph is already running; call wait_until_done() before start_run()."
            )
        observers = {name: list(callbacks) for name, callbacks in self._observers.items()}
        bound_observers = {
            name: list(callbacks) for name, callbacks in self._bound_observers.items()
        }
        pollers, self._pollers = self._pollers, []
        for poller in pollers:
            observers.setdefault(poller.stream, []).append(poller._on_packet)
            bound_observers.setdefault(poller.stream, []).append(poller._on_bound)
        run = GraphRun(
            self.validated,
            asyncio.get_running_loop(),
            self.validated.executors.get,
            observers,
            bound_observers,
            self.services,
            self.observers,
        )
        self._run = run

        def end_pollers(_: Any) -> None:
            error = run._combined_error() if run.errors else None
            for poller in pollers:
                poller._end(error)

        waiter = asyncio.ensure_future(run.finished.wait())
        waiter.add_done_callback(end_pollers)
        try:
            await run.start(input_side_packets or {})
        except GraphUsageError:
            # Refused before opening anything (missing side packets): not running, may start again.
            waiter.remove_done_callback(end_pollers)
            waiter.cancel()
            self._pollers = pollers + self._pollers
            self._run = None
            raise

    async def add_packet(
        self, stream: str, packet: Packet[Any] | Any, timestamp: int | None = None
    ) -> None:
        """Send a packet (or `payload` at `timestamp`) into a graph input stream.

        Waits while the graph is throttled (unless the graph was created with ADD_IF_NOT_FULL).
        """
        run = self._run or self._active_run()
        if run.errors:
            raise GraphRunError(run.errors, prefix="Graph has errors:")
        if not isinstance(packet, Packet):
            if timestamp is None:
                raise PacketError("add_packet() needs a Packet or a payload with a timestamp.")
            packet = Packet(packet, timestamp)
        elif timestamp is not None:
            packet = packet.at(timestamp)
        target = run.inputs.get(stream) or run.input(stream)
        value = packet._timestamp
        # The common case in one test (a bound of DONE fails it too); the rest says what is wrong.
        if target.closed or not target.output.bound <= value < POSTSTREAM:
            check_input_timestamp(target, value)
        if target.throttle:
            if self.add_mode is AddMode.ADD_IF_NOT_FULL:
                raise GraphThrottledError("Graph is throttled.")
            await run.wait_not_throttled(target)
            if run.errors:  # the run failed while we waited (e.g. a reported deadlock)
                raise GraphRunError(run.errors, prefix="Graph has errors:")
            check_input_timestamp(target, packet._timestamp)
        target.output.add(packet)

    def add_packet_nowait(self, stream: str, packet: Packet[Any]) -> None:
        """Add without waiting for throttling (callers that manage their own flow control)."""
        run = self._active_run()
        target = run.input(stream)
        check_input_timestamp(target, packet._timestamp)
        target.output.add(packet)

    def set_input_stream_timestamp_bound(self, stream: str, bound: int) -> None:
        run = self._active_run()
        target = run.input(stream)
        if bound < target.output.bound:
            raise PacketError(
                f'Timestamp bound {describe(bound)} of graph input stream "{stream}" is below its '
                f"current bound {describe(target.output.bound)}."
            )
        target.output.raise_bound(bound)

    def close_input_stream(self, stream: str) -> None:
        self._active_run().close_input_stream(stream)

    def close_all_input_streams(self) -> None:
        self._active_run().close_all_input_streams()

    def close_all_packet_sources(self) -> None:
        """Close every graph input and stop every source node; queued packets still drain."""
        self._active_run().close_all_packet_sources()

    async def wait_until_idle(self) -> None:
        """Wait until nothing is queued or running (graph inputs may stay open)."""
        await self._active_run().wait_idle()

    async def wait_until_done(self) -> None:
        """Wait for the run to end; raises `GraphRunError` listing every failure."""
        await self._active_run().wait()

    async def run(self, input_side_packets: Mapping[str, Any] | None = None) -> None:
        """start_run + wait_until_done, for graphs without input streams."""
        if self.validated.input_streams.names:
            raise GraphUsageError(
                "When using graph input streams, call start_run() instead of run() so that "
                "add_packet() can be called."
            )
        await self.start_run(input_side_packets)
        await self.wait_until_done()

    def cancel(self) -> None:
        """Stop the run: running async calls are cancelled (calls on worker threads are waited
        for), then every opened node is closed."""
        if self._run is not None:
            self._run.cancel()

    @property
    def has_error(self) -> bool:
        return bool(self._run and self._run.errors)

    @property
    def error(self) -> GraphRunError | None:
        return self._run._combined_error() if self._run and self._run.errors else None

    def get_output_side_packet(self, name: str) -> Packet[Any]:
        run = self._active_run()
        packet = run.side_packets.get(name)
        if packet is None:
            raise GraphUsageError(f'Side packet "{name}" has not been produced.')
        return packet

    def input_stream_throttled(self, stream: str) -> bool:
        return self._active_run().input(stream).throttle > 0
