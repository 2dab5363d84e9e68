"""One run of a validated graph: the ready queue, the nodes' lifecycle, and MediaPipe's run rules.

Everything runs on one asyncio event loop. Ready nodes sit in a heap keyed by a static rank that
puts nodes closer to the outputs first (MediaPipe's priority, which keeps queues short) and sources
last. The pump pops nodes and calls their hooks in one of three ways, chosen once per node:
inline (cheap sync code), as a task (`async def` hooks) or on a worker thread (sync code that may
block). The pump yields to the loop every few milliseconds so that a busy graph cannot starve the
HTTP server sharing the loop.

The run ends when every graph input is closed, every source is done and nothing is ready or
running; nodes still open then (for example those in a LOOPBACK cycle) are closed, as MediaPipe
does at the end of a run. The first failure stops the run: running tasks are cancelled (calls on
worker threads are waited for), every opened node is closed with the error visible in
`cc.graph_error`, and the error is reported once.

Per-node state lives in node_runtime.py and throttling in flow_control.py. What is left here is
one state machine (GraphRun) whose fields the per-packet path reads on every node hop; it stays
one class, and so one module above 400 lines, so that path is plain attribute access (a hop costs
~1.2 us of CPU, benchmarks/graph_passthrough.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from heapq import heappop, heappush
from typing import Any

from graphruntime.calculator import StatusStop
from graphruntime.context import (
    CalculatorContext,
    InputPackets,
    InputSidePackets,
    OutputSidePackets,
    OutputStreamHandle,
    OutputStreams,
)
from graphruntime.errors import (
    CalculatorError,
    GraphCancelledError,
    GraphError,
    GraphRunError,
    GraphUsageError,
)
from graphruntime.flow_control import FlowControl
from graphruntime.node_runtime import (
    ASYNC,
    CLOSED,
    CLOSING,
    INLINE,
    OPEN,
    OPENING,
    SKIP,
    THREAD,
    WAITING,
    GraphInputStream,
    NodeRuntime,
    offset_bound,
)
from graphruntime.observe import CLOSE as CLOSE_PHASE
from graphruntime.observe import OPEN as OPEN_PHASE
from graphruntime.observe import GraphObserver, RunObserver, observe_run
from graphruntime.packet import Packet
from graphruntime.services import GraphService
from graphruntime.stream_handlers import NOT_READY, READY_FOR_CLOSE
from graphruntime.streams import InputStream, OutputStream
from graphruntime.timestamp import DONE, MAX, MIN, ONE_OVER_POSTSTREAM, UNSET, UNSTARTED
from graphruntime.validation import ValidatedGraph

logger = logging.getLogger(__name__)

PUMP_SLICE_SECONDS = 0.005

StreamObserver = Callable[[str, Packet[Any]], None]
BoundObserver = Callable[[str, int], None]
_now = time.perf_counter_ns


async def _run_sync(method: Callable[[CalculatorContext], Any], context: CalculatorContext) -> None:
    method(context)


class GraphRun:
    """State of one run; created by `Graph.start_run` and driven on its event loop."""

    def __init__(
        self,
        graph: ValidatedGraph,
        loop: asyncio.AbstractEventLoop,
        executors: Callable[[str], Executor | None],
        observers: Mapping[str, list[StreamObserver]],
        bound_observers: Mapping[str, list[BoundObserver]],
        services: Mapping[GraphService[Any], Any] | None = None,
        graph_observers: Sequence[GraphObserver] = (),
    ) -> None:
        self.graph = graph
        self.graph_observers = graph_observers
        # Set by start(); None (nothing watches) costs one check per call, nothing per packet.
        self.observer: RunObserver | None = None
        # An observer dropped after it raised: still told the run finished, so it can clean up.
        self.dropped_observer: RunObserver | None = None
        self.loop = loop
        self.services = dict(services or {})
        self.heap: list[int] = []
        self.pump_scheduled = False
        self.running = 0
        # Process invocations in flight (cancelled when the run fails) and open/close tasks.
        self.tasks: set[asyncio.Future[Any]] = set()
        self.lifecycle: set[asyncio.Future[Any]] = set()
        self.finish_task: asyncio.Task[None] | None = None
        self.errors: list[GraphError] = []
        self.halted = False
        self.finishing = False
        self.finished = asyncio.Event()
        self.idle_waiters: list[asyncio.Future[None]] = []
        self.side_packets: dict[str, Packet[Any]] = {}
        self.streams: dict[str, OutputStream] = {}

        count = len(graph.nodes)
        # Non-sources: downstream first (higher sorted index = smaller rank). Sources after all.
        sources = [spec for spec in graph.nodes if spec.is_source]
        others = [spec for spec in graph.nodes if not spec.is_source]
        ordered = sorted(others, key=lambda s: -s.index) + sorted(
            sources, key=lambda s: (s.source_layer, s.index)
        )
        rank_of = {spec.index: rank for rank, spec in enumerate(ordered)}
        self.nodes = [
            NodeRuntime(spec, rank_of[spec.index], executors(spec.executor)) for spec in graph.nodes
        ]
        self.by_rank: list[NodeRuntime] = [self.nodes[0]] * count
        for node in self.nodes:
            self.by_rank[node.rank] = node
        self.sources = [node for node in self.nodes if node.is_source]
        self.active_sources = set(self.sources)

        schedule = self.schedule
        streams = self.streams
        self.inputs: dict[str, GraphInputStream] = {}
        for name in graph.input_streams.names:
            stream = OutputStream(name, schedule)
            streams[name] = stream
            self.inputs[name] = GraphInputStream(name, stream)
        for node in self.nodes:
            for name in node.spec.outputs.names:
                node.outputs.append(streams.setdefault(name, OutputStream(name, schedule)))
        for name, callbacks in observers.items():
            for callback in callbacks:
                streams[name].observers.append(self._guard_observer(name, callback))
        for name, bound_callbacks in bound_observers.items():
            for bound_callback in bound_callbacks:
                streams[name].bound_observers.append(
                    self._guard_bound_observer(name, bound_callback)
                )

        self.flow = FlowControl(
            graph, self.nodes, self.inputs, self.active_sources, self.schedule, self.fail
        )
        queue_limit = graph.max_queue_size
        for node in self.nodes:
            spec = node.spec
            limit = max(queue_limit, spec.buffer_size_hint) if queue_limit > 0 else -1
            for flat_id, name in enumerate(spec.inputs.names):
                back_edge = flat_id in spec.back_edges
                queue = InputStream(name, node, limit, back_edge, self.flow.on_full)
                node.inputs.append(queue)
                streams[name].consumers.append(queue)
                self.flow.watch(queue)
            if node.inputs:
                node.handler = spec.handler(
                    node.inputs, spec.inputs, spec.handler_options, spec.process_timestamp_bounds
                )
                if node.inline:
                    node.fifo = node.handler.fifo

    # ----------------------------------------------------------------------------------- setup

    def _guard_observer(self, name: str, callback: StreamObserver) -> Callable[[Packet[Any]], None]:
        def observe(packet: Packet[Any]) -> None:
            try:
                callback(name, packet)
            except Exception as error:
                self.fail(GraphError(f'Observer of output stream "{name}" failed: {error}'))

        return observe

    def _guard_bound_observer(self, name: str, callback: BoundObserver) -> Callable[[int], None]:
        def observe(bound: int) -> None:
            try:
                callback(name, bound)
            except Exception as error:
                self.fail(GraphError(f'Observer of output stream "{name}" failed: {error}'))

        return observe

    def _make_context(self, node: NodeRuntime) -> CalculatorContext:
        spec = node.spec
        side_packets = [
            self.side_packets.get(name, Packet.empty()) for name in spec.input_side_packets.names
        ]
        context = CalculatorContext(
            spec.name,
            spec.calculator_name,
            InputPackets(spec.inputs),
            InputSidePackets(spec.input_side_packets, side_packets),
            OutputSidePackets(
                spec.output_side_packets, functools.partial(self._set_side_packet, node)
            ),
            functools.partial(self.graph.node_options, spec),
            spec.calculator.options_type,
            self.services,
        )
        context.outputs = OutputStreams(
            spec.outputs, [OutputStreamHandle(stream, context) for stream in node.outputs]
        )
        return context

    def _acquire_context(self, node: NodeRuntime) -> CalculatorContext:
        if node.max_in_flight == 1:
            assert node.context is not None
            return node.context
        return node.free_contexts.pop() if node.free_contexts else self._make_context(node)

    # ------------------------------------------------------------------------------- lifecycle

    async def start(self, side_packets: Mapping[str, Any]) -> None:
        for name, value in side_packets.items():
            self.side_packets[name] = value if isinstance(value, Packet) else Packet(value)
        missing = [
            name
            for name, required in self.graph.external_side_packets.items()
            if required and name not in self.side_packets
        ]
        if missing:
            raise GraphUsageError(
                "; ".join(
                    f'Side packet "{name}" is required but was not provided.' for name in missing
                )
            )
        absent = [
            f'Service "{service.name}" is required by node "{node.name}" but was not provided.'
            for node in self.nodes
            for service, required in node.spec.services
            if required and service not in self.services
        ]
        if absent:
            raise GraphUsageError("; ".join(absent))
        if self.graph_observers:
            self._attach_observer()
        for node in self.nodes:
            if self.halted:
                break
            # Not one whose side packets an earlier node's open() produced: that one is opening.
            if node.state == WAITING and self._side_packets_ready(node):
                await self._open(node)
        if self.errors:
            await self.wait()
        self._maybe_idle()

    def _attach_observer(self) -> None:
        observer = self.observer = observe_run(self.graph_observers, self)
        if observer is not None:
            for name, stream in self.streams.items():
                stream.observers.append(functools.partial(self._observe_packet, name))

    def _observer_failed(self, error: Exception) -> None:
        """Watching must not break the run: a failing observer is dropped, with a log line."""
        logger.error("graph observer failed, not observing this run any more: %r", error)
        if self.observer is not None:
            self.dropped_observer = self.observer
        self.observer = None

    def _observe_packet(self, stream: str, packet: Packet[Any]) -> None:
        if self.observer is not None:
            try:
                self.observer.packet(stream, packet)
            except Exception as error:
                self._observer_failed(error)

    def _observe_lifecycle(
        self, node: NodeRuntime, phase: str, started: int, error: BaseException | None
    ) -> None:
        if self.observer is not None:
            try:
                self.observer.lifecycle(node.spec.index, phase, started, _now(), error)
            except Exception as failure:
                self._observer_failed(failure)

    def queue_depths(self) -> list[int]:
        """Packets waiting in each node's input queues, by node index."""
        return [sum(len(stream.queue) for stream in node.inputs) for node in self.nodes]

    def _side_packets_ready(self, node: NodeRuntime) -> bool:
        spec = node.spec
        for flat_id, name in enumerate(spec.input_side_packets.names):
            if name in self.side_packets:
                continue
            if (
                flat_id in spec.optional_side_packets
                and name not in self.graph.side_packet_producers
            ):
                continue
            return False
        return True

    def _set_side_packet(self, node: NodeRuntime, name: str, packet: Packet[Any]) -> None:
        if name in self.side_packets:
            raise GraphError(f'Output side packet "{name}" was already set.')
        self.side_packets[name] = packet
        for waiting in self.nodes:
            if waiting.state == WAITING and self._side_packets_ready(waiting):
                waiting.state = OPENING  # now: start() must not open it before the task does
                self._spawn(self._open(waiting))

    async def _open(self, node: NodeRuntime) -> None:
        node.state = OPENING
        node.calculator = node.spec.calculator()
        node.context = self._make_context(node)
        context = node.context
        started = _now()
        try:
            await self._call(node, node.open_mode, "open", context)
        except Exception as error:
            node.state = CLOSED  # Open failed: neither process nor close will be called.
            self._observe_lifecycle(node, OPEN_PHASE, started, error)
            self._record(node, "Open", error)
            return
        self._observe_lifecycle(node, OPEN_PHASE, started, None)
        node.state = OPEN
        self.schedule(node)

    async def _call(
        self, node: NodeRuntime, mode: int, hook: str, context: CalculatorContext
    ) -> None:
        """Run a hook outside the pump (open/close), in the node's mode."""
        if mode == SKIP:
            return
        method = getattr(node.calculator, hook)
        if mode == ASYNC:
            await method(context)
        elif mode == THREAD:
            context._buffer = []
            try:
                await self.loop.run_in_executor(node.executor, method, context)
            finally:
                context.flush_buffer()
        else:
            method(context)

    def _spawn(self, coroutine: Any) -> None:
        """Run an open or close as a task; the run is not idle until it ends."""
        task = self.loop.create_task(coroutine)
        self.running += 1
        self.lifecycle.add(task)
        task.add_done_callback(self._lifecycle_done)

    def _lifecycle_done(self, task: asyncio.Future[Any]) -> None:
        self.running -= 1
        self.lifecycle.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.fail(GraphError(f"internal error: {task.exception()!r}"))
        self._maybe_idle()

    # -------------------------------------------------------------------------------- pumping

    def schedule(self, node: NodeRuntime) -> None:
        if node.queued or node.state != OPEN:
            return
        node.queued = True
        heappush(self.heap, node.rank)
        if not self.pump_scheduled:
            self.pump_scheduled = True
            self.loop.call_soon(self.pump)

    def pump(self) -> None:
        heap = self.heap
        by_rank = self.by_rank
        step = self._step
        deadline = time.perf_counter() + PUMP_SLICE_SECONDS
        count = 0
        step_fifo = self._step_fifo
        while heap and not self.halted:
            node = by_rank[heappop(heap)]
            node.queued = False
            if node.fifo is None:
                step(node)
            else:
                step_fifo(node)
            count += 1
            if count & 31 == 0 and time.perf_counter() > deadline:
                break
        if heap and not self.halted:
            self.loop.call_soon(self.pump)
            return
        self.pump_scheduled = False
        heap.clear()
        self._maybe_idle()

    def _step(self, node: NodeRuntime) -> None:
        if node.state != OPEN or node.in_flight >= node.max_in_flight:
            return
        handler = node.handler
        if handler is None:  # a source
            if node not in self.active_sources:
                # Stopped (close_all_packet_sources) while a call was running: close it now, so
                # its outputs close and downstream nodes can finish before the run ends.
                if node.in_flight == 0:
                    self._spawn(self._close(node))
                return
            if node.throttle == 0 and self._source_turn(node):
                context = self._acquire_context(node)
                context._input_timestamp = 0  # MediaPipe's dummy input timestamp for sources
                self._invoke(node, UNSTARTED, context)
            return
        try:
            single_context = node.context if node.max_in_flight == 1 else None
            if single_context is not None:
                # readiness() and fill_input_set() in one call (the common node).
                timestamp = handler.take(single_context.inputs._packets)
            else:
                timestamp = handler.readiness()
            if timestamp == NOT_READY:
                # With parallel calls in flight, earlier outputs are still buffered: wait for them.
                if node.offset is not None and node.in_flight == 0:
                    node.propagate_offset(handler.min_stream_timestamp())
                return
            if timestamp == READY_FOR_CLOSE:
                if node.in_flight == 0:
                    self._spawn(self._close(node))
                return
            if single_context is not None:
                context = single_context
            else:
                context = self._acquire_context(node)
                handler.fill_input_set(timestamp, context.inputs._packets)
        except Exception as error:
            self._record(node, "Process", error)
            return
        context._input_timestamp = timestamp
        if not node.inline or self.observer is not None:
            self._invoke(node, timestamp, context)
            return
        # The fast path for a cheap synchronous process(), the common node: `_invoke` and
        # `_processed` inlined, and no second trip through the ready queue just to learn that
        # nothing else is ready. On a 10-node chain of PassThroughCalculators this took a node
        # hop from ~3.2 to ~2 us (benchmarks/graph_passthrough.py); the order in which nodes
        # run is unchanged. One-input nodes with the default handler go further, in _step_fifo.
        bound = self._process_inline(node, context, timestamp)
        if bound is None:
            return
        offset = node.offset
        # `_processed` would schedule the node again, and its next step would find it not ready
        # and only propagate the offset bound; a handler that can tell that without side effects
        # (quiet_bound) lets that happen here instead.
        quiet = handler.quiet_bound()
        if quiet is None or self.halted:
            self.schedule(node)
        elif offset is not None and quiet + offset > bound:  # else the bounds are there already
            node.propagate_offset(quiet)

    def _process_inline(
        self, node: NodeRuntime, context: CalculatorContext, timestamp: int
    ) -> int | None:
        """The fast paths' process() call and offset bound (`_invoke` and `_raise_offset_bound`
        inlined): the bound raised on the outputs (UNSET without an offset), or None when
        process() failed."""
        calculator = node.calculator
        assert calculator is not None
        try:
            calculator.process(context)
        except Exception as error:
            self._process_failed(node, error)
            return None
        offset = node.offset
        if offset is None:
            return UNSET
        bound = (
            timestamp + 1 + offset if MIN <= timestamp < MAX else offset_bound(timestamp, offset)
        )
        for stream in node.outputs:
            if bound > stream.bound:
                stream.raise_bound(bound)
        return bound

    def _step_fifo(self, node: NodeRuntime) -> None:
        """`_step` for an inline node whose handler is a FIFO over one queue (`node.fifo`).

        The same outcome as `_step`'s fast path with `handler.take` and `handler.quiet_bound`
        done here on the queue: on a chain of PassThroughCalculators those calls were a fifth
        of a node hop (benchmarks/graph_passthrough.py).
        """
        stream = node.fifo
        assert stream is not None
        queue = stream.queue
        if node.state != OPEN:
            return
        if not queue or self.observer is not None:
            if queue or stream.bound >= ONE_OVER_POSTSTREAM:
                self._step(node)  # observed, or ready for close
            elif node.offset is not None:
                node.propagate_offset(stream.bound)
            return
        # InputStream.pop_head; the stream's bound is past the head already (OutputStream.add).
        packet = queue.popleft()
        if stream.full and len(queue) < stream.max_size:
            stream.full = False
            stream.on_full_change(stream, False)
        context = node.context
        assert context is not None
        context.inputs._packets[0] = packet
        timestamp = packet._timestamp
        context._input_timestamp = timestamp
        bound = self._process_inline(node, context, timestamp)
        if bound is None:
            return
        offset = node.offset
        if queue or self.halted or stream.bound >= ONE_OVER_POSTSTREAM:
            self.schedule(node)
        elif offset is not None and stream.bound + offset > bound:
            node.propagate_offset(stream.bound)

    def _source_turn(self, node: NodeRuntime) -> bool:
        layer = min(source.spec.source_layer for source in self.active_sources)
        return node.spec.source_layer == layer

    def _invoke(
        self, node: NodeRuntime, timestamp: int, context: CalculatorContext | None = None
    ) -> None:
        if context is None:
            context = self._acquire_context(node)
            context._input_timestamp = timestamp
        mode = node.process_mode
        calculator = node.calculator
        assert calculator is not None
        observer = self.observer
        if observer is not None:
            context._started = _now()
        if mode in (INLINE, SKIP):
            try:
                calculator.process(context)
            except Exception as error:
                if observer is not None:
                    self._observe_process(node, context, error)
                self._process_failed(node, error)
                return
            if observer is not None:
                self._observe_process(node, context, None)
            self._processed(node, timestamp)
            return
        node.in_flight += 1
        self.running += 1
        if node.spec.max_in_flight > 1:
            context._buffer = []
            node.in_order.append((context, False))
        future: asyncio.Future[Any]
        if mode == ASYNC:
            if "process" in node.spec.async_hooks:
                coroutine = calculator.process(context)
            else:  # non-blocking sync process() under max_in_flight > 1
                coroutine = _run_sync(calculator.process, context)
            future = self.loop.create_task(coroutine)  # type: ignore[arg-type]
        else:
            context._buffer = []
            future = self.loop.run_in_executor(node.executor, calculator.process, context)
        self.tasks.add(future)
        future.add_done_callback(functools.partial(self._invoked, node, context, timestamp))
        if node.in_flight < node.spec.max_in_flight and node.handler is not None:
            self.schedule(node)  # max_in_flight > 1: the next input set may start now

    def _invoked(
        self,
        node: NodeRuntime,
        context: CalculatorContext,
        timestamp: int,
        future: asyncio.Future[Any],
    ) -> None:
        self.tasks.discard(future)
        node.in_flight -= 1
        self.running -= 1
        error = None if future.cancelled() else future.exception()
        if future.cancelled() and not self.halted:
            error = asyncio.CancelledError()
        if self.observer is not None:
            self._observe_process(
                node, context, asyncio.CancelledError() if future.cancelled() else error
            )
        if node.spec.max_in_flight > 1:
            self._release_in_order(node, context)
        elif context._buffer is not None:
            try:
                context.flush_buffer()
            except GraphError as flush_error:
                error = error or flush_error
        if error is not None:
            self._process_failed(node, error)
        elif not future.cancelled():
            self._processed(node, timestamp)
        self.schedule(node)
        self._maybe_idle()

    def _release_in_order(self, node: NodeRuntime, context: CalculatorContext) -> None:
        """Deliver outputs of parallel invocations in input order (InOrderOutputStreamHandler)."""
        for i, (pending, _) in enumerate(node.in_order):
            if pending is context:
                node.in_order[i] = (context, True)
                break
        while node.in_order and node.in_order[0][1]:
            done, _ = node.in_order.popleft()
            try:
                done.flush_buffer()
            except GraphError as error:
                self._record(node, "Process", error)
            node.raise_offset_bound(done._input_timestamp)
            node.free_contexts.append(done)

    def _observe_process(
        self, node: NodeRuntime, context: CalculatorContext, error: BaseException | None
    ) -> None:
        if self.observer is None:  # dropped after a failure during this call
            return
        try:
            self.observer.process(
                node.spec.index,
                context._input_timestamp,
                context.inputs._packets,
                context._started,
                _now(),
                None if isinstance(error, StatusStop) else error,
            )
        except Exception as failure:
            self._observer_failed(failure)

    def _processed(self, node: NodeRuntime, timestamp: int) -> None:
        if node.spec.max_in_flight == 1:  # parallel calls raise it in order, on release
            node.raise_offset_bound(timestamp)
        self.schedule(node)  # more input sets (or the next source turn) may be waiting

    def _process_failed(self, node: NodeRuntime, error: BaseException) -> None:
        if isinstance(error, StatusStop):
            if node.is_source:
                self.active_sources.discard(node)
                self._spawn(self._close(node))
                self._wake_sources()
            else:
                self.close_all_packet_sources()
                self.schedule(node)  # its queued packets still drain, as MediaPipe's
            return
        if isinstance(error, asyncio.CancelledError) and self.halted:
            return
        self._record(node, "Process", error)

    async def _close(self, node: NodeRuntime) -> None:
        if node.state != OPEN:
            return
        node.state = CLOSING
        self.active_sources.discard(node)
        context = node.context
        assert context is not None
        context._input_timestamp = DONE
        context.graph_error = self._combined_error() if self.errors else None
        started = _now()
        failure: Exception | None = None
        try:
            await self._call(node, node.close_mode, "close", context)
        except Exception as error:
            failure = error
            self._record(node, "Close", error)
        self._observe_lifecycle(node, CLOSE_PHASE, started, failure)
        node.state = CLOSED
        if not self.halted:
            for stream in node.outputs:
                stream.close()

    # ---------------------------------------------------------------------------- graph inputs

    def input(self, name: str) -> GraphInputStream:
        stream = self.inputs.get(name)
        if stream is None:
            known = ", ".join(f'"{n}"' for n in self.inputs) or "none"
            raise GraphUsageError(
                f'Graph has no input stream named "{name}" (graph input streams: {known}).'
            )
        return stream

    def close_input_stream(self, name: str) -> None:
        stream = self.input(name)
        if stream.closed:
            return
        stream.closed = True
        stream.output.close()
        self._maybe_idle()

    def close_all_input_streams(self) -> None:
        for name in self.inputs:
            self.close_input_stream(name)

    def close_all_packet_sources(self) -> None:
        self.close_all_input_streams()
        for source in list(self.active_sources):
            self.active_sources.discard(source)
            if source.in_flight == 0:
                self._spawn(self._close(source))
        self._maybe_idle()

    def _wake_sources(self) -> None:
        for source in self.active_sources:
            self.schedule(source)

    async def wait_not_throttled(self, stream: GraphInputStream) -> None:
        while stream.throttle > 0 and not self.halted:
            waiter = self.loop.create_future()
            stream.waiters.append(waiter)
            self._maybe_idle()
            await waiter

    # ------------------------------------------------------------------------ idle and the end

    def _maybe_idle(self) -> None:
        # A scheduled pump calls this again when it is done; deciding now could end a run that
        # still has ready nodes (e.g. a StatusStop closing the inputs from inside the pump).
        if self.heap or self.running or self.finishing or self.pump_scheduled:
            return
        waiters, self.idle_waiters = self.idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        all_closed = all(stream.closed for stream in self.inputs.values())
        if self.halted or (all_closed and not self.active_sources):
            self.finishing = True
            self.finish_task = self.loop.create_task(self._finish())
            return
        if self.flow.deadlocked():
            self.flow.resolve_deadlock()

    async def _finish(self) -> None:
        """Close what is still open, then report the outcome.

        The observer hears of the end however the run ends (closing failing, this task being
        cancelled), so whatever it keeps per run in flight is always released.
        """
        try:
            while self.tasks or self.lifecycle:
                await asyncio.wait([*self.tasks, *self.lifecycle])
            for node in self.nodes:
                if node.state == OPEN:
                    await self._close(node)
            for stream in self.inputs.values():
                stream.closed = True
                for waiter in stream.waiters:
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            observer = self.observer or self.dropped_observer
            self.observer = self.dropped_observer = None
            if observer is not None:
                try:
                    observer.finished(self.errors)
                except Exception as error:
                    logger.error("graph observer failed when the run finished: %r", error)
            self.finished.set()
        self._release()  # not when cancelled: a close() on a worker thread may still be running

    def _release(self) -> None:
        """Break the references that make a finished run one big reference cycle.

        Nodes, streams, contexts and the run point at each other both ways (a queue at the node it
        feeds, output handles back at their context, streams and flow control at the run's
        methods). Left so, a finished run and all it held (for an LLM request ~150 objects, the
        HTTP request among them) wait for the cyclic garbage collector: in bursts of LLM requests
        that cost ~0.3 ms of CPU per request, and its full collections stopped the event loop for
        130-170 ms every ~600 requests. Nothing runs in a finished run, so these links have no
        use left; what callers still read (errors, side packets, input streams) stays.
        """
        for stream in self.streams.values():
            stream.detach()
        for node in self.nodes:
            node.detach()
        self.flow.detach()

    def fail(self, error: GraphError) -> None:
        self.errors.append(error)
        if not self.halted:
            self.halted = True
            logger.debug("graph run stopped: %s", error.message)
            for task in list(self.tasks):
                # A call on a worker thread cannot be interrupted: it finishes before the nodes
                # are closed, so close() never runs concurrently with process().
                if isinstance(task, asyncio.Task):
                    task.cancel()
        if not self.pump_scheduled:
            self._maybe_idle()

    def _record(self, node: NodeRuntime, phase: str, error: BaseException) -> None:
        if isinstance(error, asyncio.CancelledError):
            error = GraphCancelledError("cancelled")
        self.fail(CalculatorError(node.name, phase, error))

    def cancel(self) -> None:
        if not self.finished.is_set():
            self.fail(GraphCancelledError("Graph run was cancelled."))

    def _combined_error(self) -> GraphRunError:
        return GraphRunError(self.errors)

    async def wait(self) -> None:
        await self.finished.wait()
        if self.errors:
            raise self._combined_error()

    async def wait_idle(self) -> None:
        if self.sources:
            raise GraphUsageError("wait_until_idle is not supported in graphs with source nodes.")
        if not (self.heap or self.running) or self.finished.is_set():
            return
        waiter = self.loop.create_future()
        self.idle_waiters.append(waiter)
        await waiter
