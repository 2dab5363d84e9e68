"""The input stream handler interface and MediaPipe's sync-set readiness rule.

A handler answers two questions for its node: "may process() run now, and at which input
timestamp?" (`readiness`) and "which packets does it see?" (`fill_input_set`). Readiness is encoded
in one int to keep the scheduler's hot path allocation-free: `NOT_READY`, `READY_FOR_CLOSE`, or the
input timestamp itself (always a value allowed in a stream, so the codes cannot collide).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from google.protobuf.message import Message

from graphruntime.packet import Packet
from graphruntime.streams import InputStream
from graphruntime.tags import TagMap
from graphruntime.timestamp import (
    DONE,
    ONE_OVER_POSTSTREAM,
    POSTSTREAM,
    UNSET,
    UNSTARTED,
    previous_allowed_in_stream,
)

NOT_READY = UNSET
READY_FOR_CLOSE = DONE


class InputStreamHandler:
    """Base class; subclasses register under their class name (see `registry`)."""

    options_type: ClassVar[type[Message] | None] = None
    # Set by a handler whose input sets are exactly the packets of this one queue, head first:
    # ready when it holds a packet, ready for close when it is empty and done, never ready on a
    # bound alone. The scheduler then pops the queue itself (GraphRun._step_fifo), which saves
    # the handler calls on every packet of the common single-input node.
    fifo: InputStream | None = None

    def __init__(
        self,
        streams: Sequence[InputStream],
        tag_map: TagMap,
        options: Message | None,
        process_timestamp_bounds: bool,
    ) -> None:
        self.streams = list(streams)
        self.tag_map = tag_map
        self.options = options
        self.process_timestamp_bounds = process_timestamp_bounds
        self.prepare()

    def prepare(self) -> None:
        """Build per-run state from `streams`, `options` etc.; subclasses override this."""

    @classmethod
    def config_problems(cls, tag_map: TagMap, options: Message | None) -> list[str]:
        """Problems with the handler's options for this node, found before the graph runs."""
        return []

    def readiness(self) -> int:
        raise NotImplementedError

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        raise NotImplementedError

    def take(self, packets: list[Packet[Any]]) -> int:
        """`readiness()`, and when it gives an input timestamp, `fill_input_set()` for it: the
        scheduler's one call per step for a node without parallel calls. A handler may do both
        at once for speed; the result must be the same."""
        timestamp = self.readiness()
        if timestamp != NOT_READY and timestamp != READY_FOR_CLOSE:
            self.fill_input_set(timestamp, packets)
        return timestamp

    def quiet_bound(self) -> int | None:
        """After a process() call: None, or, when the handler can tell cheaply and without
        side effects that no input set is ready (readiness() would say NOT_READY), the value
        min_stream_timestamp() has then. Lets the scheduler skip a step that would only find
        the node not ready; None is always correct."""
        return None

    def min_stream_timestamp(self) -> int:
        """Earliest timestamp that may still be processed; drives offset bound propagation."""
        result = DONE
        for stream in self.streams:
            value = stream.queue[0]._timestamp if stream.queue else stream.bound
            if value < result:
                result = value
        return result


class SyncSet:
    """Streams whose packets are delivered together, by timestamp (MediaPipe's SyncSet)."""

    __slots__ = ("ids", "last_processed", "process_bounds", "streams")

    def __init__(self, streams: Sequence[InputStream], ids: Sequence[int], process_bounds: bool):
        self.ids = list(ids)
        self.streams = [streams[i] for i in ids]
        self.last_processed = UNSET
        self.process_bounds = process_bounds

    def readiness(self) -> tuple[int, int]:
        """(code, min_stream_timestamp); code is NOT_READY, READY_FOR_CLOSE or the input ts."""
        min_bound = DONE
        min_packet = DONE
        for stream in self.streams:
            if stream.queue:
                timestamp = stream.queue[0]._timestamp
                if timestamp < min_packet:
                    min_packet = timestamp
            elif stream.bound < min_bound:
                min_bound = stream.bound
        minimum = min_packet if min_packet < min_bound else min_bound
        if minimum >= ONE_OVER_POSTSTREAM:
            self.last_processed = previous_allowed_in_stream(DONE)
            return READY_FOR_CLOSE, DONE
        if not self.process_bounds:
            if min_bound > min_packet:
                self.last_processed = minimum
                return minimum, minimum
            return NOT_READY, minimum
        if min_packet == POSTSTREAM and min_bound > min_packet:
            settled = min_packet
        else:
            settled = previous_allowed_in_stream(min_bound)
        input_timestamp = min_packet if min_packet < settled else settled
        if input_timestamp > max(self.last_processed, UNSTARTED):
            self.last_processed = input_timestamp
            return input_timestamp, input_timestamp
        return NOT_READY, minimum

    def fill(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        for flat_id, stream in zip(self.ids, self.streams, strict=True):
            packets[flat_id] = stream.pop_at(timestamp)

    def fill_bounds(self, packets: list[Packet[Any]]) -> None:
        for flat_id, stream in zip(self.ids, self.streams, strict=True):
            packets[flat_id] = stream.empty_at_bound()
