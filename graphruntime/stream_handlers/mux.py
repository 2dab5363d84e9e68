"""MuxInputStreamHandler: pass on the data stream the SELECT stream chooses, per timestamp.

The control stream is the last input by flat id (tag SELECT sorts after INPUT); its int payload
picks the data stream. Data packets of timestamps the control stream has passed are dropped.
"""

from __future__ import annotations

from typing import Any

from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import NOT_READY, READY_FOR_CLOSE, InputStreamHandler
from graphruntime.streams import InputStream, StreamError
from graphruntime.tags import TagMap
from graphruntime.timestamp import DONE, next_allowed_in_stream


class MuxInputStreamHandler(InputStreamHandler):
    @classmethod
    def config_problems(cls, tag_map: TagMap, options: object) -> list[str]:
        if len(tag_map) < 2:
            return ["MuxInputStreamHandler needs data streams and a control stream."]
        return []

    def _selected(self, control: InputStream) -> InputStream:
        value = control.queue[0]._payload
        data_count = len(self.streams) - 1
        if not isinstance(value, int) or not 0 <= value < data_count:
            raise StreamError(
                f'MuxInputStreamHandler: control packet on "{control.name}" must be an int in '
                f"[0, {data_count}), got {value!r}"
            )
        return self.streams[value]

    def _drop_outdated(self, timestamp: int) -> None:
        for stream in self.streams[:-1]:
            stream.erase_earlier_than(timestamp)

    def readiness(self) -> int:
        control = self.streams[-1]
        timestamp = control.head_or_bound()
        self._drop_outdated(timestamp)
        if not control.queue:
            return READY_FOR_CLOSE if timestamp == DONE else NOT_READY
        data = self._selected(control)
        if not data.queue and data.bound <= timestamp:
            return NOT_READY
        return timestamp

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        control = self.streams[-1]
        data = self._selected(control)
        for flat_id, stream in enumerate(self.streams):
            packets[flat_id] = stream.empty_at_bound()
        data_id = self.streams.index(data)
        packets[data_id] = data.pop_at(timestamp)
        packets[-1] = control.pop_at(timestamp)
        self._drop_outdated(next_allowed_in_stream(timestamp))
