"""FixedSizeInputStreamHandler: bound the input queues by dropping the oldest timestamps.

For real-time graphs that prefer fresh data over complete data: once a queue reaches
`trigger_queue_size`, the oldest timestamps are dropped on every stream until `target_queue_size`
remain, so slow nodes skip frames instead of falling behind.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from graphruntime._proto.stream_handler_options_pb2 import FixedSizeInputStreamHandlerOptions
from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import NOT_READY, SyncSet
from graphruntime.stream_handlers.default import DefaultInputStreamHandler
from graphruntime.streams import InputStream
from graphruntime.tags import TagMap
from graphruntime.timestamp import DONE, MAX, MIN, UNSET, next_allowed_in_stream


def _previous(bound: int) -> int:
    return bound - 1 if MIN <= bound <= MAX else bound


def _min_among_latest(stream: InputStream, count: int) -> int:
    """Timestamp of the count-th newest packet (the oldest if fewer), UNSET when empty."""
    queue = stream.queue
    if not queue:
        return UNSET
    return queue[-count]._timestamp if len(queue) >= count else queue[0]._timestamp


class FixedSizeInputStreamHandler(DefaultInputStreamHandler):
    options_type = FixedSizeInputStreamHandlerOptions

    def prepare(self) -> None:
        settings = (
            self.options
            if isinstance(self.options, FixedSizeInputStreamHandlerOptions)
            else FixedSizeInputStreamHandlerOptions()
        )
        self.trigger = settings.trigger_queue_size
        self.target = settings.target_queue_size
        self.fixed_min_size = settings.fixed_min_size
        self.kept = UNSET
        self.pending = False
        self.sync_set = SyncSet(
            self.streams, range(len(self.streams)), self.process_timestamp_bounds
        )
        self._single = None

    @classmethod
    def config_problems(cls, tag_map: TagMap, options: Message | None) -> list[str]:
        if isinstance(options, FixedSizeInputStreamHandlerOptions) and not (
            1 <= options.target_queue_size < options.trigger_queue_size
        ):
            return [
                "FixedSizeInputStreamHandler: need 1 <= target_queue_size < trigger_queue_size."
            ]
        return []

    def _min_stream_bound(self) -> int:
        result = DONE
        for stream in self.streams:
            latest = _min_among_latest(stream, 1)
            bound = next_allowed_in_stream(latest) if latest > UNSET else stream.head_or_bound()
            result = min(result, bound)
        return result

    def _erase_surplus(self, keep_one: bool) -> None:
        if self.fixed_min_size:
            oldest_kept = MAX
            for stream in self.streams:
                if len(stream.queue) < self.trigger:
                    return
                oldest_kept = min(oldest_kept, _min_among_latest(stream, self.target))
            for stream in self.streams:
                stream.erase_earlier_than(oldest_kept)
            return
        for stream in self.streams:
            size = self.target if len(stream.queue) >= self.trigger else self.trigger - 1
            if len(stream.queue) > size:
                self.kept = max(
                    self.kept, next_allowed_in_stream(_min_among_latest(stream, size + 1))
                )
        if keep_one:
            self.kept = min(self.kept, _previous(self._min_stream_bound()))
        for stream in self.streams:
            stream.erase_earlier_than(self.kept)

    def readiness(self) -> int:
        if self.pending:
            return NOT_READY
        self._erase_surplus(False)
        code = self.sync_set.readiness()[0]
        while code not in (NOT_READY, DONE) and code < self.kept:
            self._erase_surplus(False)
            code = self.sync_set.readiness()[0]
        self.pending = code not in (NOT_READY, DONE)
        return code

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        self._erase_surplus(True)
        earliest = DONE
        for stream in self.streams:
            value = stream.queue[0]._timestamp if stream.queue else _previous(stream.bound)
            earliest = min(earliest, value)
        self.sync_set.fill(earliest, packets)
        self.pending = False
