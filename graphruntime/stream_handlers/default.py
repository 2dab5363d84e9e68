"""DefaultInputStreamHandler: process timestamp t once every input is settled at t.

All inputs form one sync set; packets sharing a timestamp are delivered together, in increasing
timestamp order, and nothing is dropped. `batch_size` is accepted for compatibility; batching
itself is not implemented and values other than 1 are refused at validation.
"""

from __future__ import annotations

from typing import Any, ClassVar

from google.protobuf.message import Message

from graphruntime._proto.stream_handler_options_pb2 import DefaultInputStreamHandlerOptions
from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import (
    NOT_READY,
    READY_FOR_CLOSE,
    InputStreamHandler,
    SyncSet,
)
from graphruntime.tags import TagMap
from graphruntime.timestamp import ONE_OVER_POSTSTREAM


class DefaultInputStreamHandler(InputStreamHandler):
    options_type: ClassVar[type[Message] | None] = DefaultInputStreamHandlerOptions

    def prepare(self) -> None:
        self.sync_set = SyncSet(
            self.streams, range(len(self.streams)), self.process_timestamp_bounds
        )
        # The common one-input case skips the generic sync-set loop.
        self._single = (
            self.streams[0]
            if len(self.streams) == 1 and not self.process_timestamp_bounds
            else None
        )
        # A FIFO by this class's own rules only: a subclass may change what is ready.
        self.fifo = self._single if type(self) is DefaultInputStreamHandler else None

    @classmethod
    def config_problems(cls, tag_map: TagMap, options: Message | None) -> list[str]:
        if isinstance(options, DefaultInputStreamHandlerOptions) and options.batch_size != 1:
            return ["DefaultInputStreamHandler: batch_size other than 1 is not supported."]
        return []

    def readiness(self) -> int:
        single = self._single
        if single is not None:
            if single.queue:
                return single.queue[0]._timestamp
            return READY_FOR_CLOSE if single.bound >= ONE_OVER_POSTSTREAM else NOT_READY
        return self.sync_set.readiness()[0]

    def take(self, packets: list[Packet[Any]]) -> int:
        single = self._single
        if single is None:
            return super().take(packets)
        queue = single.queue
        if not queue:
            return READY_FOR_CLOSE if single.bound >= ONE_OVER_POSTSTREAM else NOT_READY
        timestamp: int = queue[0]._timestamp
        packets[0] = single.pop_at(timestamp)
        return timestamp

    def quiet_bound(self) -> int | None:
        single = self._single
        if single is not None and not single.queue and single.bound < ONE_OVER_POSTSTREAM:
            return single.bound
        return None

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        single = self._single
        if single is not None:
            packets[0] = single.pop_at(timestamp)
        else:
            self.sync_set.fill(timestamp, packets)
