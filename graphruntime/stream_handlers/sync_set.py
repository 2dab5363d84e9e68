"""SyncSetInputStreamHandler: independent groups of inputs, each synchronized on its own.

Used by OpenVINO Model Server's LLM graph: the request stream and the LOOPBACK back edge are in
different sets, so the first request is processed without waiting for a loopback bound, and every
loopback packet re-triggers process() on its own. Streams not named in any set form one extra set.
When several sets are ready the one with the earliest timestamp wins; one set is processed per call.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from graphruntime._proto.stream_handler_options_pb2 import SyncSetInputStreamHandlerOptions
from graphruntime.packet import Packet
from graphruntime.stream_handlers.base import (
    NOT_READY,
    READY_FOR_CLOSE,
    InputStreamHandler,
    SyncSet,
)
from graphruntime.tags import TagError, TagMap, parse_tag_index
from graphruntime.timestamp import DONE


def _partition(tag_map: TagMap, options: Message | None) -> tuple[list[list[int]], list[str]]:
    """Flat ids of each configured set plus the set of the remaining streams, and any problems."""
    sets: list[list[int]] = []
    problems: list[str] = []
    used: set[int] = set()
    configured = options.sync_set if isinstance(options, SyncSetInputStreamHandlerOptions) else []
    for sync_set in configured:
        ids: list[int] = []
        if not sync_set.tag_index:
            problems.append("SyncSetInputStreamHandler: a sync_set lists no streams.")
        for tag_index in sync_set.tag_index:
            try:
                tag, index = parse_tag_index(tag_index)
            except TagError as error:
                problems.append(str(error))
                continue
            flat_id = tag_map.find(tag, index)
            if flat_id is None:
                problems.append(
                    f'SyncSetInputStreamHandler: stream "{tag_index}" is not an input stream of '
                    "the node."
                )
            elif flat_id in used:
                problems.append(
                    f'SyncSetInputStreamHandler: stream "{tag_index}" is in more than one sync set.'
                )
            else:
                used.add(flat_id)
                ids.append(flat_id)
        if ids:
            sets.append(ids)
    remaining = [i for i in range(len(tag_map)) if i not in used]
    if remaining:
        sets.append(remaining)
    return sets, problems


class SyncSetInputStreamHandler(InputStreamHandler):
    options_type = SyncSetInputStreamHandlerOptions

    def prepare(self) -> None:
        partition, _ = _partition(self.tag_map, self.options)
        self.sync_sets = [
            SyncSet(self.streams, ids, self.process_timestamp_bounds) for ids in partition
        ]
        # Sets whose self.streams are done still get (empty) packets, so no stale input lingers.
        self.done_sets: list[SyncSet] = []
        self._ready: SyncSet | None = None
        self._ready_timestamp = DONE

    @classmethod
    def config_problems(cls, tag_map: TagMap, options: Message | None) -> list[str]:
        return _partition(tag_map, options)[1]

    def readiness(self) -> int:
        if self._ready is not None:
            return self._ready_timestamp
        for sync_set in list(self.sync_sets):
            code, _ = sync_set.readiness()
            if code == READY_FOR_CLOSE:
                self.sync_sets.remove(sync_set)
                self.done_sets.append(sync_set)
            elif code != NOT_READY and code < self._ready_timestamp:
                self._ready_timestamp = code
                self._ready = sync_set
        if self._ready is not None:
            return self._ready_timestamp
        return READY_FOR_CLOSE if not self.sync_sets else NOT_READY

    def fill_input_set(self, timestamp: int, packets: list[Packet[Any]]) -> None:
        ready = self._ready
        assert ready is not None, "fill_input_set without readiness"
        ready.fill(timestamp, packets)
        for sync_set in self.sync_sets:
            if sync_set is not ready:
                sync_set.fill_bounds(packets)
        for sync_set in self.done_sets:
            sync_set.fill_bounds(packets)
        self._ready = None
        self._ready_timestamp = DONE
