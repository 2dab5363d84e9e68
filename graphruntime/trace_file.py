"""Chrome trace-event files of a graph's profiler: rows, rotation and appending.

The profiler (graphruntime.profiler) records `TraceEvent`s; this writes them as trace-event JSON,
which Perfetto (ui.perfetto.dev) and chrome://tracing open directly. Each write goes to
`<prefix><i>.json`: a new file every `interval_count` writes, cycling over `log_count` files.
Every file is a complete JSON array at all times: new events are appended before its closing
bracket. Calls of one node that overlap in time go on separate rows ("lanes") of that node, as a
trace viewer needs properly nested slices per row.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from graphruntime.observe import PROCESS


class TraceEvent(NamedTuple):
    """One Open/Process/Close call of a node, as the profiler recorded it."""

    phase: str
    node: int
    start: int
    end: int
    timestamp: int
    inputs: tuple[tuple[str, int], ...]
    run: int
    error: str | None


class TraceFiles:
    """The trace files of one profiler; `write` raises OSError when a file cannot be written."""

    def __init__(
        self,
        name: str,
        nodes: Sequence[tuple[str, str]],
        prefix: str,
        interval_count: int,
        log_count: int,
        instant_events: bool,
    ) -> None:
        self.name = name
        self.nodes = nodes  # (node name, calculator name) per node
        self.prefix = prefix
        self.interval_count = interval_count
        self.log_count = log_count
        self.instant_events = instant_events  # a begin and an end event per call
        # The base time every file's timestamps count from, and the rotation state.
        self.base_ns = time.perf_counter_ns()
        self.base_wall = time.time()
        self.log_index = -1
        self.files_written: list[str] = []
        self._lanes: list[list[int]] = [[] for _ in nodes]  # per node: end of each row
        self._quoted: dict[str, str] = {}  # names as JSON strings
        self.pid = os.getpid()

    def write(self, events: Sequence[TraceEvent]) -> str:
        """Write `events` (not empty) to the current file; returns its path."""
        self.log_index += 1
        new_file = self.log_index % self.interval_count == 0
        file_index = self.log_index // self.interval_count % self.log_count
        path = f"{self.prefix}{file_index}.json"
        # Sorted by start so rows are assigned in time order.
        records = [
            record for event in sorted(events, key=_start) for record in self._event_records(event)
        ]
        # Row names go with every write (duplicates are harmless): rows appear as calls overlap.
        metadata = [json.dumps(record, separators=(",", ":")) for record in self._metadata()]
        body = ",\n".join(metadata + records)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        if new_file or not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as file:
                file.write("[\n" + body + "\n]\n")
        else:
            with open(path, "r+b") as file:
                file.seek(-3, os.SEEK_END)  # before "\n]\n"
                file.write((",\n" + body + "\n]\n").encode())
                file.truncate()
        if path not in self.files_written:
            self.files_written.append(path)
        return path

    def _lane(self, node: int, start: int, end: int) -> int:
        """A row of this node free at `start` (calls on one row must not overlap)."""
        lanes = self._lanes[node]
        for lane, busy_until in enumerate(lanes):
            if busy_until <= start:
                lanes[lane] = end
                return lane
        lanes.append(end)
        return len(lanes) - 1

    def _tid(self, node: int, lane: int) -> int:
        return node * 1000 + lane + 1

    def _metadata(self) -> list[dict[str, Any]]:
        pid = os.getpid()
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": self.name}},
            {
                "name": "graphrt_trace_base",
                "ph": "M",
                "pid": pid,
                "args": {"wall_clock_at_ts_0": self.base_wall},
            },
        ]
        for node, lanes in enumerate(self._lanes):
            name = self.nodes[node][0]
            for lane in range(max(1, len(lanes))):
                tid = self._tid(node, lane)
                label = name if lane == 0 else f"{name} ({lane + 1})"
                events.append(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": label},
                    }
                )
                events.append(
                    {
                        "name": "thread_sort_index",
                        "ph": "M",
                        "pid": pid,
                        "tid": tid,
                        "args": {"sort_index": tid},
                    }
                )
        return events

    def _json_string(self, text: str) -> str:
        quoted = self._quoted.get(text)
        if quoted is None:
            quoted = self._quoted[text] = json.dumps(text)
        return quoted

    def _event_records(self, event: TraceEvent) -> list[str]:
        """The event as trace-event JSON objects (formatted directly: this runs per call)."""
        name, calculator = self.nodes[event.node]
        lane = self._lane(event.node, event.start, event.end)
        quote = self._json_string
        args = f'"calculator":{quote(calculator)},"run":{event.run}'
        if event.phase == PROCESS:
            inputs = ",".join(
                f'{{"stream":{quote(stream)},"timestamp":{timestamp}}}'
                for stream, timestamp in event.inputs
            )
            args += f',"input_timestamp":{event.timestamp},"inputs":[{inputs}]'
        if event.error is not None:
            args += f',"error":{json.dumps(event.error)}'
        common = (
            f'"name":{quote(name)},"cat":"{event.phase}","pid":{self.pid},'
            f'"tid":{self._tid(event.node, lane)}'
        )
        start_us = (event.start - self.base_ns) / 1000
        end_us = (event.end - self.base_ns) / 1000
        if self.instant_events:
            return [
                f'{{{common},"ph":"B","ts":{start_us:.3f},"args":{{{args}}}}}',
                f'{{{common},"ph":"E","ts":{end_us:.3f}}}',
            ]
        return [
            f'{{{common},"ph":"X","ts":{start_us:.3f},"dur":{end_us - start_us:.3f},'
            f'"args":{{{args}}}}}'
        ]


def _start(event: TraceEvent) -> int:
    return event.start
