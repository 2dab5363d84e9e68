"""ImmediateInputStreamHandler: every input stream is its own sync set.

process() runs as soon as any stream has a packet; input timestamps may go backwards across
streams. For compatibility with MediaPipe it also runs once, with empty inputs, when a stream
becomes done (unless timestamp bounds are processed, which signals closing at Done - 1 instead).
"""

from __future__ import annotations

from typing import Any

from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import (
    NOT_READY,
    READY_FOR_CLOSE,
    InputStreamHandler,
    SyncSet,
)
from graphruntime.timestamp import DONE, UNSET, previous_allowed_in_stream

_DONE_PRECEDING = previous_allowed_in_stream(DONE)


class ImmediateInputStreamHandler(InputStreamHandler):
    def prepare(self) -> None:
        self.sync_sets = [
            SyncSet(self.streams, [i], self.process_timestamp_bounds)
            for i in range(len(self.streams))
        ]
        self.ready_timestamps = [UNSET] * len(self.streams)

    def readiness(self) -> int:
        input_timestamp = DONE
        min_bound = DONE
        stream_became_done = False
        for i, sync_set in enumerate(self.sync_sets):
            ready = self.ready_timestamps[i]
            if ready > UNSET:
                min_bound = min(min_bound, ready)
                input_timestamp = min(input_timestamp, ready)
                continue
            previous = sync_set.last_processed
            code, stream_timestamp = sync_set.readiness()
            min_bound = min(min_bound, stream_timestamp)
            if code == READY_FOR_CLOSE:
                if self.process_timestamp_bounds:
                    if previous < _DONE_PRECEDING:
                        min_bound = min(min_bound, _DONE_PRECEDING)
                        input_timestamp = min(input_timestamp, _DONE_PRECEDING)
                        self.ready_timestamps[i] = _DONE_PRECEDING
                    else:
                        self.ready_timestamps[i] = DONE
                elif previous < DONE:
                    stream_became_done = True
                    self.ready_timestamps[i] = DONE
            elif code != NOT_READY:
                self.ready_timestamps[i] = code
                input_timestamp = min(input_timestamp, code)
        if min_bound == DONE:
            return READY_FOR_CLOSE
        if input_timestamp < DONE:
            return input_timestamp
        if stream_became_done:
            return min_bound
        return NOT_READY

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        for i, sync_set in enumerate(self.sync_sets):
            if self.ready_timestamps[i] == timestamp:
                sync_set.fill(timestamp, packets)
                self.ready_timestamps[i] = UNSET
            else:
                sync_set.fill_bounds(packets)
