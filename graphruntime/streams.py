"""The two ends of a stream edge: the producer's `OutputStream` and each consumer's `InputStream`.

An output stream owns the timestamp bound of the edge and pushes packets into one `InputStream`
queue per consumer. Pushing is immediate (no intermediate shard as in MediaPipe): the scheduler runs
on one event loop, so the only reason to buffer is a calculator running on a worker thread, and the
calculator context does that buffering. Everything here runs on the graph's event loop; nothing is
locked. Raw ints are used for timestamps to keep the per-packet path short.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphruntime.errors import GraphError
from graphruntime.packet import Packet
from graphruntime.timestamp import (
    DONE,
    MAX,
    MIN,
    ONE_OVER_POSTSTREAM,
    POSTSTREAM,
    PRESTREAM,
    describe,
    next_allowed_in_stream,
    previous_allowed_in_stream,
)

if TYPE_CHECKING:
    from graphruntime.node_runtime import NodeRuntime


class StreamError(GraphError):
    """A packet or bound that breaks a stream's timestamp rules."""


Observer = Callable[[Packet[Any]], None]


class InputStream:
    """A consumer's queue on one edge, plus the edge's bound as that consumer sees it."""

    __slots__ = (
        "back_edge",
        "bound",
        "full",
        "max_size",
        "name",
        "node",
        "on_full_change",
        "queue",
    )

    def __init__(
        self,
        name: str,
        node: NodeRuntime,
        max_size: int,
        back_edge: bool,
        on_full_change: Callable[[InputStream, bool], None],
    ) -> None:
        self.name = name
        self.node = node
        self.queue: deque[Packet[Any]] = deque()
        self.bound = PRESTREAM
        self.max_size = max_size  # <= 0 means unlimited
        self.full = False
        self.back_edge = back_edge
        self.on_full_change = on_full_change

    def is_done(self) -> bool:
        return not self.queue and self.bound >= ONE_OVER_POSTSTREAM

    def head_or_bound(self) -> int:
        return self.queue[0]._timestamp if self.queue else self.bound

    def pop_at(self, timestamp: int) -> Packet[Any]:
        """The packet at exactly `timestamp` (older ones are dropped), else an empty packet."""
        queue = self.queue
        if self.bound <= timestamp:
            self.bound = next_allowed_in_stream(timestamp)
        packet = None
        while queue and queue[0]._timestamp <= timestamp:
            packet = queue.popleft()
        if self.full and len(queue) < self.max_size:
            self.full = False
            self.on_full_change(self, False)
        if packet is None or packet._timestamp != timestamp:
            return Packet.empty(previous_allowed_in_stream(self.head_or_bound()))
        return packet

    def pop_head(self) -> Packet[Any]:
        packet = self.queue.popleft()
        if self.full and len(self.queue) < self.max_size:
            self.full = False
            self.on_full_change(self, False)
        return packet

    def erase_earlier_than(self, timestamp: int) -> None:
        queue = self.queue
        while queue and queue[0]._timestamp < timestamp:
            queue.popleft()
        if self.full and len(queue) < self.max_size:
            self.full = False
            self.on_full_change(self, False)

    def empty_at_bound(self) -> Packet[Any]:
        return Packet.empty(previous_allowed_in_stream(self.head_or_bound()))


class OutputStream:
    """The producing end of a stream: checks timestamps and fans packets out to consumers."""

    __slots__ = (
        "bound",
        "bound_observers",
        "consumers",
        "name",
        "observers",
        "schedule",
    )

    def __init__(self, name: str, schedule: Callable[[NodeRuntime], None]) -> None:
        self.name = name
        self.bound = PRESTREAM
        self.consumers: list[InputStream] = []
        self.observers: list[Observer] = []
        self.bound_observers: list[Callable[[int], None]] = []
        self.schedule = schedule

    @property
    def closed(self) -> bool:
        return self.bound == DONE

    def check(self, timestamp: int) -> None:
        """Raise the error MediaPipe would raise for a packet at `timestamp`, if any."""
        if timestamp < self.bound:
            if self.bound == DONE:
                raise StreamError(f'Packet sent to closed stream "{self.name}".')
            if timestamp < PRESTREAM or timestamp > POSTSTREAM:
                raise StreamError(
                    f'In stream "{self.name}", timestamp not specified or set to illegal value: '
                    f"{describe(timestamp)}"
                )
            if self.bound == ONE_OVER_POSTSTREAM:
                raise StreamError(
                    f'In stream "{self.name}", a packet at {describe(PRESTREAM)} or '
                    f"{describe(POSTSTREAM)} must be the only packet in the stream "
                    f"(received one at {describe(timestamp)})."
                )
            raise StreamError(
                f'Packet timestamp mismatch on stream "{self.name}". Current minimum expected '
                f"timestamp is {describe(self.bound)} but received {describe(timestamp)}."
            )
        if timestamp > POSTSTREAM:
            raise StreamError(
                f'In stream "{self.name}", timestamp not specified or set to illegal value: '
                f"{describe(timestamp)}"
            )
        if timestamp == POSTSTREAM and self.bound > PRESTREAM:
            raise StreamError(
                f'In stream "{self.name}", a packet at {describe(POSTSTREAM)} must be the only '
                "packet in the stream."
            )

    def add(self, packet: Packet[Any]) -> None:
        timestamp = packet._timestamp
        if timestamp < self.bound or timestamp >= POSTSTREAM:
            self.check(timestamp)
        bound = timestamp + 1 if MIN <= timestamp < MAX else ONE_OVER_POSTSTREAM
        self.bound = bound
        schedule = self.schedule
        for consumer in self.consumers:
            queue = consumer.queue
            queue.append(packet)
            consumer.bound = bound
            if consumer.max_size > 0 and len(queue) >= consumer.max_size and not consumer.full:
                consumer.full = True
                consumer.on_full_change(consumer, True)
            if not consumer.node.queued:  # (schedule() checks it too; this saves the call)
                schedule(consumer.node)
        for observer in self.observers:
            observer(packet)

    def raise_bound(self, bound: int) -> None:
        """Promise that no packet below `bound` will come; wakes consumers waiting on it."""
        if bound <= self.bound:
            return
        if bound > ONE_OVER_POSTSTREAM:
            bound = DONE
        self.bound = bound
        schedule = self.schedule
        for consumer in self.consumers:
            if bound > consumer.bound:
                consumer.bound = bound
                if not consumer.queue:
                    schedule(consumer.node)
        for observer in self.bound_observers:
            observer(bound)

    def close(self) -> None:
        self.raise_bound(DONE)

    def detach(self) -> None:
        """Forget consumers, observers and the run's scheduler once the run has finished
        (`GraphRun._release`); the bound stays, so a late packet still meets its error."""
        self.consumers = []
        self.observers = []
        self.bound_observers = []
        self.schedule = _schedule_nothing


def _schedule_nothing(node: NodeRuntime) -> None:
    """The scheduler of a finished run's streams."""
