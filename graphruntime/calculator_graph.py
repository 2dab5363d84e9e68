"""`CalculatorGraph`: MediaPipe's synchronous graph API, for code without an event loop.

MediaPipe users drive graphs from plain Python (`start_run`, `add_packet_to_input_stream`,
`wait_until_done`); this class keeps those names. The graph itself runs as a `Graph` on one
background event-loop thread shared by all `CalculatorGraph` objects; observer callbacks run on
that thread, like MediaPipe's worker threads.

Adding packets is the hot path, so it does not hop threads for every packet: packets go into an
inbox that the loop drains in batches (one loop wake-up per batch), and only when the graph is
throttled does the caller block (on the loop's own throttling logic). Misuse is still reported at
the call: the stream name, closed streams and timestamp order are checked once, in the caller's
thread, against the run's own input streams, so the loop moves the packets on unchecked.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from graphruntime._proto import calculator_pb2
from graphruntime.config import GraphConfig
from graphruntime.errors import GraphError, GraphRunError, GraphUsageError, PacketError
from graphruntime.graph import AddMode, Graph, GraphThrottledError, poststream_not_alone
from graphruntime.node_runtime import GraphInputStream
from graphruntime.packet import Packet
from graphruntime.scheduler import GraphRun
from graphruntime.timestamp import DONE, POSTSTREAM, PRESTREAM, describe, next_allowed_in_stream
from graphruntime.validation import ValidatedGraph

T = TypeVar("T")

BLOCKING_IN_CALLBACK = (
    "A blocking CalculatorGraph method was called from a graph callback; that would deadlock. "
    "Use graphruntime.Graph inside async code."
)


class _LoopThread:
    """One daemon thread running an event loop for every synchronous graph in the process."""

    _instance: _LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="graphrt-loop", daemon=True
        )
        self.thread.start()

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise GraphUsageError(BLOCKING_IN_CALLBACK)
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


class _Gate:
    """A producer thread waits here until the loop has taken its packet (or refused it)."""

    __slots__ = ("_lock", "error")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.error: BaseException | None = None

    def open(self) -> None:
        self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()
        if self.error is not None:
            raise self.error


class OutputStreamPollerSync:
    """Blocking iterator over one stream's packets (MediaPipe's OutputStreamPoller)."""

    _END = object()

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ended = False

    def _on_packet(self, _stream: str, packet: Packet[Any]) -> None:
        self._queue.put(packet)

    def _start(self) -> None:
        """A new run (no run is active): drop the previous run's end mark, keep unread packets."""
        if not self._ended:
            return
        items = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not self._END:
                items.append(item)
        for item in items:
            self._queue.put(item)
        self._ended = False

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put(self._END)

    def next(self, timeout: float | None = None) -> Packet[Any] | None:
        """The next packet, or None once the stream has ended."""
        item = self._queue.get(timeout=timeout)
        if item is self._END:
            self._queue.put(item)
            return None
        packet: Packet[Any] = item
        return packet

    def __iter__(self) -> Iterator[Packet[Any]]:
        while (packet := self.next()) is not None:
            yield packet


class CalculatorGraph:
    """See the module docstring. Calls for one stream must come from one thread (as MediaPipe)."""

    def __init__(
        self,
        graph_config: ValidatedGraph | GraphConfig | calculator_pb2.CalculatorGraphConfig | str,
        *,
        add_mode: AddMode = AddMode.WAIT_TILL_NOT_FULL,
    ) -> None:
        validated = (
            graph_config
            if isinstance(graph_config, ValidatedGraph)
            else ValidatedGraph.from_config(graph_config)
        )
        self._runner = _LoopThread.get()
        self._loop = self._runner.loop
        self._graph = Graph(validated, add_mode=add_mode)
        self._add_mode = add_mode
        # Packets on their way to the loop, drained in batches: one loop wake-up per batch.
        self._inbox: deque[tuple[GraphInputStream, Packet[Any]]] = deque()
        self._inbox_limit = validated.max_queue_size if validated.max_queue_size > 0 else 1 << 62
        self._drain_pending = False
        self._run: GraphRun | None = None
        self._targets: dict[str, GraphInputStream] = {}
        self._gated_tasks: set[asyncio.Task[None]] = set()
        self._bounds: dict[str, int] = {}
        self._closed: set[str] = set()
        self._pollers: list[OutputStreamPollerSync] = []
        self._end_pollers_task: asyncio.Future[None] | None = None
        self._started = False

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def validated_graph(self) -> ValidatedGraph:
        return self._graph.validated

    @property
    def text_config(self) -> str:
        from google.protobuf import text_format

        return text_format.MessageToString(self._graph.validated.config.proto)

    @property
    def max_queue_size(self) -> int:
        return self._graph.validated.max_queue_size

    def observe_output_stream(
        self,
        stream_name: str,
        packet_callback: Callable[[str, Packet[Any]], None],
        observe_timestamp_bounds: bool = False,
    ) -> None:
        """`packet_callback(stream_name, packet)` runs on the graph thread; add it before start."""
        self._graph.observe_output_stream(
            stream_name, packet_callback, observe_timestamp_bounds=observe_timestamp_bounds
        )

    def add_output_stream_poller(self, stream_name: str) -> OutputStreamPollerSync:
        poller = OutputStreamPollerSync(stream_name)
        self._graph.observe_output_stream(stream_name, poller._on_packet)
        self._pollers.append(poller)
        return poller

    def start_run(self, input_side_packets: Mapping[str, Any] | None = None) -> None:
        if self._started and self._graph.running:
            raise GraphUsageError(
                "The graph is already running; call wait_until_done() before start_run()."
            )
        self._bounds = {name: PRESTREAM for name in self._graph.validated.input_streams.names}
        self._closed = set()
        self._inbox.clear()
        self._run = None
        self._targets = {}
        self._started = True
        for poller in self._pollers:
            poller._start()
        self._runner.call(self._start_run(input_side_packets))
        # The caller's thread reads these without a hop: errors and throttling of the run.
        self._run = self._graph._active_run()
        self._targets = dict(self._run.inputs)

    async def _start_run(self, input_side_packets: Mapping[str, Any] | None) -> None:
        await self._graph.start_run(input_side_packets)
        # Pollers end with the run even if nobody calls wait_until_done() first (as MediaPipe's
        # Next() returns false once the graph is done), so iterating them cannot hang.
        self._end_pollers_task = asyncio.ensure_future(self._end_pollers_after_run())

    async def _end_pollers_after_run(self) -> None:
        try:
            await self._graph.wait_until_done()
        except GraphError:
            pass  # wait_until_done() reports it to the caller
        finally:
            for poller in self._pollers:
                poller._end()

    def _require_started(self) -> None:
        if not self._started:
            raise GraphUsageError(
                "CalculatorGraph.add_packet_to_input_stream() is called before start_run()."
            )

    def add_packet_to_input_stream(
        self, stream: str, packet: Packet[Any] | Any, timestamp: int | None = None
    ) -> None:
        """Add a packet; blocks while the graph is throttled (WAIT_TILL_NOT_FULL mode)."""
        if not self._started:
            self._require_started()
        if not isinstance(packet, Packet):
            if timestamp is None:
                raise PacketError("add_packet_to_input_stream() needs a Packet or a timestamp.")
            packet = Packet(packet, timestamp)
        elif timestamp is not None:
            packet = packet.at(timestamp)
        target = self._targets.get(stream)
        run = self._run
        if target is None or run is None:
            if stream in self._bounds:
                raise GraphUsageError("The graph is not running; call start_run() first.")
            known = ", ".join(f'"{name}"' for name in self._bounds) or "none"
            raise GraphUsageError(
                f'Graph has no input stream named "{stream}" (graph input streams: {known}).'
            )
        value = packet._timestamp
        bound = self._bounds[stream]  # DONE once closed here
        if value < bound or value >= POSTSTREAM or target.closed:
            self._check_unusual(stream, target, run, value, bound)
        elif run.errors:
            raise GraphRunError(run.errors, prefix="Graph has errors:")
        inbox = self._inbox
        if target.throttle or len(inbox) >= self._inbox_limit:
            if self._add_mode is AddMode.ADD_IF_NOT_FULL:
                raise GraphThrottledError("Graph is throttled.")  # not added: may be retried
            self._bounds[stream] = next_allowed_in_stream(value)
            self._add_when_not_throttled(stream, packet)
            return
        self._bounds[stream] = next_allowed_in_stream(value)
        inbox.append((target, packet))
        if not self._drain_pending:
            self._drain_pending = True
            self._loop.call_soon_threadsafe(self._drain)

    def _check_unusual(
        self, stream: str, target: GraphInputStream, run: GraphRun, value: int, bound: int
    ) -> None:
        """The checks of add_packet_to_input_stream() beyond the common case, in their order."""
        if stream in self._closed:
            raise PacketError(
                f'Graph input stream "{stream}" is closed; no packet can be added after '
                "close_input_stream()."
            )
        if value < bound or not PRESTREAM <= value <= POSTSTREAM:
            raise PacketError(
                f'Packet timestamp mismatch on graph input stream "{stream}". Current minimum '
                f"expected timestamp is {describe(bound)} but received {describe(value)}. "
                "Timestamps must strictly increase on each stream."
            )
        if value == POSTSTREAM and bound > PRESTREAM:
            raise PacketError(poststream_not_alone(stream))
        if run.errors:
            raise GraphRunError(run.errors, prefix="Graph has errors:")
        if target.closed:  # by the graph: a node's StatusStop, or the run ended
            raise PacketError(
                f'Graph input stream "{stream}" is closed; no packet can be added after '
                "close_input_stream()."
            )

    def _add_when_not_throttled(self, stream: str, packet: Packet[Any]) -> None:
        """Block until the loop has added `packet` (after every packet queued before it)."""
        if threading.current_thread() is self._runner.thread:
            raise GraphUsageError(BLOCKING_IN_CALLBACK)
        # A bare lock rather than run_coroutine_threadsafe's concurrent future: the producer
        # waits here once per max_queue_size packets (~1,000 times per 100,000 packets on
        # benchmarks/graph_passthrough.py), and the future's Condition cost ~3% of the run.
        gate = _Gate()
        self._loop.call_soon_threadsafe(self._spawn_gated_add, stream, packet, gate)
        gate.wait()

    def _spawn_gated_add(self, stream: str, packet: Packet[Any], gate: _Gate) -> None:
        task = self._loop.create_task(self._gated_add(stream, packet, gate))
        self._gated_tasks.add(task)
        task.add_done_callback(self._gated_tasks.discard)

    async def _gated_add(self, stream: str, packet: Packet[Any], gate: _Gate) -> None:
        try:
            self._drain()
            await self._graph.add_packet(stream, packet)
        except BaseException as error:
            gate.error = error
        finally:
            gate.open()

    def _drain(self) -> None:
        """On the loop: move inbox packets into the graph (the flag is cleared before popping).

        The producer's thread already checked each packet against the stream's bound, so they
        go straight to the stream; what it could not know (the run failed, or a node's
        StatusStop closed the inputs) drops them here, and the next call reports it.
        """
        self._drain_pending = False
        inbox = self._inbox
        run = self._run
        if run is None:  # start_run() failed
            inbox.clear()
            return
        while inbox:
            target, packet = inbox.popleft()
            if run.errors or run.halted:
                continue
            if not target.closed:  # else the producer's next call reports it
                target.output.add(packet)

    def _on_loop(self, action: Callable[[], None]) -> None:
        """Run a graph call on the loop after every packet added so far."""

        async def call() -> None:
            self._drain()
            action()

        self._runner.call(call())

    def set_input_stream_timestamp_bound(self, stream: str, bound: int) -> None:
        self._require_started()
        self._on_loop(lambda: self._graph.set_input_stream_timestamp_bound(stream, bound))
        self._bounds[stream] = max(self._bounds.get(stream, PRESTREAM), bound)

    def close_input_stream(self, stream: str) -> None:
        self._require_started()
        if stream not in self._bounds:
            raise GraphUsageError(f'Graph has no input stream named "{stream}".')
        self._closed.add(stream)
        self._bounds[stream] = DONE
        self._on_loop(lambda: self._graph.close_input_stream(stream))

    def close_all_input_streams(self) -> None:
        self._require_started()
        self._close_all_here()
        self._on_loop(self._graph.close_all_input_streams)

    def close_all_packet_sources(self) -> None:
        self._require_started()
        self._close_all_here()
        self._on_loop(self._graph.close_all_packet_sources)

    def _close_all_here(self) -> None:
        self._closed.update(self._bounds)
        for name in self._bounds:
            self._bounds[name] = DONE

    def wait_until_idle(self) -> None:
        self._require_started()

        async def wait() -> None:
            self._drain()
            await self._graph.wait_until_idle()

        self._runner.call(wait())

    def wait_until_done(self) -> None:
        """Wait for the run to end; raises `GraphRunError` if it failed."""
        self._require_started()

        async def wait() -> None:
            self._drain()
            await self._graph.wait_until_done()

        try:
            self._runner.call(wait())
        finally:
            for poller in self._pollers:
                poller._end()

    def close(self) -> None:
        """close_all_packet_sources() then wait_until_done()."""
        self.close_all_packet_sources()
        self.wait_until_done()

    def run(self, input_side_packets: Mapping[str, Any] | None = None) -> None:
        self._started = True
        for poller in self._pollers:
            poller._start()
        try:
            self._runner.call(self._graph.run(input_side_packets))
        finally:
            for poller in self._pollers:
                poller._end()

    def cancel(self) -> None:
        self._runner.loop.call_soon_threadsafe(self._graph.cancel)

    def has_error(self) -> bool:
        return self._graph.has_error

    def get_combined_error_message(self) -> str:
        error = self._graph.error
        return error.message if error else ""

    def get_output_side_packet(self, name: str) -> Packet[Any]:
        return self._graph.get_output_side_packet(name)
