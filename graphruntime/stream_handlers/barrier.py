"""BarrierInputStreamHandler and EarlyCloseInputStreamHandler.

Barrier: run when every input holds a packet, whatever their timestamps (the heads are delivered
together); close as soon as any input is done. EarlyClose: like the default handler, but close as
soon as any input is done instead of waiting for all of them.
"""

from __future__ import annotations

from typing import Any

from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import NOT_READY, READY_FOR_CLOSE, InputStreamHandler
from graphruntime.timestamp import DONE


class BarrierInputStreamHandler(InputStreamHandler):
    def readiness(self) -> int:
        earliest = DONE
        all_available = True
        for stream in self.streams:
            if stream.queue:
                earliest = min(earliest, stream.queue[0]._timestamp)
            elif stream.bound == DONE:
                return READY_FOR_CLOSE
            else:
                all_available = False
        return earliest if all_available else NOT_READY

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        for flat_id, stream in enumerate(self.streams):
            packets[flat_id] = stream.pop_head()


class EarlyCloseInputStreamHandler(InputStreamHandler):
    def readiness(self) -> int:
        earliest = DONE
        min_bound = DONE
        for stream in self.streams:
            if stream.queue:
                earliest = min(earliest, stream.queue[0]._timestamp)
            elif stream.bound == DONE:
                return READY_FOR_CLOSE
            else:
                min_bound = min(min_bound, stream.bound)
                earliest = min(earliest, stream.bound)
        return earliest if min_bound > earliest else NOT_READY

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        for flat_id, stream in enumerate(self.streams):
            packets[flat_id] = stream.pop_at(timestamp)
