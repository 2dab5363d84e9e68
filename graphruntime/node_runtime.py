"""What one run keeps per node and per graph input stream, and the bound rules a node applies.

`NodeRuntime` holds a node's calculator, context(s), input queues, output streams, lifecycle state
and the way each of its hooks is called (chosen once, from the calculator class and the node's
executor). `GraphInputStream` is a stream the application feeds. Both can be throttled (held back
while a queue they feed is full; see flow_control.py). The scheduler (scheduler.py) drives them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from graphruntime.calculator import Calculator
from graphruntime.context import CalculatorContext
from graphruntime.stream_handlers import InputStreamHandler
from graphruntime.streams import InputStream, OutputStream
from graphruntime.timestamp import (
    DONE,
    MAX,
    MIN,
    ONE_OVER_POSTSTREAM,
    POSTSTREAM,
    PRESTREAM,
    UNSTARTED,
    next_allowed_in_stream,
)

if TYPE_CHECKING:
    from graphruntime.validation import NodeSpec

# How a hook is called.
SKIP, INLINE, ASYNC, THREAD = range(4)
# Node lifecycle.
WAITING, OPENING, OPEN, CLOSING, CLOSED = range(5)


def hook_mode(spec: NodeSpec, hook: str, executor: Executor | None) -> int:
    calculator = spec.calculator
    if getattr(calculator, hook) is getattr(Calculator, hook):
        return SKIP
    if hook in spec.async_hooks:
        return ASYNC
    if calculator.blocking and executor is not None:
        return THREAD
    return INLINE


def offset_bound(input_timestamp: int, offset: int) -> int:
    """Output bound implied by a timestamp offset after processing `input_timestamp`."""
    if input_timestamp == PRESTREAM:
        return MIN
    if input_timestamp == MAX:
        return POSTSTREAM if offset >= 0 else next_allowed_in_stream(input_timestamp + offset)
    if input_timestamp == POSTSTREAM:
        return ONE_OVER_POSTSTREAM
    return next_allowed_in_stream(input_timestamp) + offset


class Throttled:
    """Something that feeds a graph and can be held back: a graph input stream or a source node."""

    __slots__ = ("throttle",)

    def __init__(self) -> None:
        self.throttle = 0


class GraphInputStream(Throttled):
    """A graph input stream: the application adds packets to it (Graph.add_packet)."""

    __slots__ = ("closed", "name", "output", "waiters")

    def __init__(self, name: str, output: OutputStream) -> None:
        super().__init__()
        self.name = name
        self.output = output
        self.closed = False
        self.waiters: list[asyncio.Future[None]] = []


class NodeRuntime(Throttled):
    __slots__ = (
        "calculator",
        "close_mode",
        "context",
        "executor",
        "fifo",
        "free_contexts",
        "handler",
        "in_flight",
        "in_order",
        "inline",
        "inputs",
        "max_in_flight",
        "name",
        "offset",
        "open_mode",
        "outputs",
        "process_mode",
        "queued",
        "rank",
        "spec",
        "state",
    )

    def __init__(self, spec: NodeSpec, rank: int, executor: Executor | None) -> None:
        super().__init__()
        self.spec = spec
        self.name = spec.name
        self.rank = rank
        self.executor = executor
        self.calculator: Calculator | None = None
        self.handler: InputStreamHandler | None = None
        self.inputs: list[InputStream] = []
        self.outputs: list[OutputStream] = []
        self.context: CalculatorContext | None = None
        self.free_contexts: list[CalculatorContext] = []
        self.in_order: deque[tuple[CalculatorContext, bool]] = deque()
        self.state = WAITING
        self.queued = False
        self.in_flight = 0
        self.max_in_flight = spec.max_in_flight
        self.offset = spec.timestamp_offset
        self.open_mode = hook_mode(spec, "open", executor)
        self.process_mode = hook_mode(spec, "process", executor)
        self.close_mode = hook_mode(spec, "close", executor)
        if spec.max_in_flight > 1 and self.process_mode == INLINE:
            self.process_mode = ASYNC if spec.calculator.blocking is False else THREAD
        # process() runs right inside the pump (see GraphRun._step's fast path).
        self.inline = self.process_mode in (INLINE, SKIP) and spec.max_in_flight == 1
        # An inline node whose handler is a FIFO over one queue (set with the handler): the
        # pump pops that queue itself (GraphRun._step_fifo).
        self.fifo: InputStream | None = None

    @property
    def is_source(self) -> bool:
        return not self.spec.inputs.names

    def detach(self) -> None:
        """Drop the run's queues, handler and contexts once it has finished (`GraphRun._release`);
        the calculator object stays, for whoever still holds it."""
        for context in (self.context, *self.free_contexts, *(c for c, _ in self.in_order)):
            if context is not None:
                context.detach()
        self.context = None
        self.free_contexts = []
        self.in_order.clear()
        self.inputs = []
        self.outputs = []
        self.handler = None
        self.fifo = None

    def raise_offset_bound(self, timestamp: int) -> None:
        """After a call at `timestamp`, raise the outputs' bound by the node's timestamp offset."""
        if self.offset is not None and timestamp != UNSTARTED and self.handler is not None:
            bound = offset_bound(timestamp, self.offset)
            for stream in self.outputs:
                if bound > stream.bound:
                    stream.raise_bound(bound)

    def propagate_offset(self, input_bound: int) -> None:
        """With no call to make, pass the inputs' bound on to the outputs, plus the offset."""
        if not MIN <= input_bound <= MAX:
            return
        assert self.offset is not None
        bound = input_bound + self.offset
        for stream in self.outputs:
            if bound > stream.bound and stream.bound != DONE:
                stream.raise_bound(bound)
