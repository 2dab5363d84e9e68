"""MediaPipe's GraphProfiler in Python: per-node timing profiles and Chrome trace-event files.

A graph's `profiler_config` turns it on, with MediaPipe's field names:

- `enable_profiler`: keep per-node profiles (Process() calls, total time, a histogram with
  `histogram_interval_size_usec` x `num_histogram_intervals`, Open()/Close() time); nodes whose
  name does not fully match the regular expression `calculator_filter` are left out.
- `trace_enabled`: record one event per Open/Process/Close call (at most `trace_log_capacity`,
  20000 by default, kept in memory between writes; types in `trace_event_types_disabled`, with
  MediaPipe's numbers OPEN=1 PROCESS=2 CLOSE=3, are not recorded) with the node, the input
  timestamp and the stream and timestamp of every input packet.
- Unless `trace_log_disabled`, events are written every `trace_log_interval_usec` (0.5 s by
  default) and when a run ends, to `<trace_log_path><i>.json`: a new file every
  `trace_log_interval_count` writes (10), cycling over `trace_log_count` files (2). The default
  path is `mediapipe_trace_` in the temporary directory. `trace_log_instant_events` writes a
  begin and an end event per call instead of one complete event.

Where MediaPipe writes binary GraphProfile protos for its own visualizer, this writes Chrome's
trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open directly. Every
file is a complete JSON array at all times: new events are appended before its closing bracket.
Calls of one node that overlap in time (concurrent runs, max_in_flight) go on separate rows of
that node, as a trace viewer needs properly nested slices per row. This module records;
graphruntime.trace_file writes the files.

`enable_stream_latency` and `use_packet_timestamp_for_added_packet` are accepted and ignored.
One profiler serves every run of a graph (a server attaches one per servable).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from graphruntime._proto import calculator_pb2
from graphruntime.errors import GraphError
from graphruntime.observe import CLOSE, OPEN, PROCESS
from graphruntime.packet import Packet
from graphruntime.stats import Durations, percentile
from graphruntime.trace_file import TraceEvent, TraceFiles
from graphruntime.validation import ValidatedGraph

if TYPE_CHECKING:
    from graphruntime.scheduler import GraphRun

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "mediapipe_trace_"
DEFAULT_CAPACITY = 20000
DEFAULT_INTERVAL_USEC = 500_000
DEFAULT_INTERVAL_COUNT = 10
DEFAULT_LOG_COUNT = 2
DEFAULT_HISTOGRAM_INTERVAL_USEC = 1_000_000
# MediaPipe's GraphTrace.EventType numbers, as trace_event_types_disabled names them.
EVENT_TYPES = {OPEN: 1, PROCESS: 2, CLOSE: 3}
PROFILE_SAMPLES = 10_000  # recent durations per node kept for the p99


@dataclass(frozen=True)
class ProfilerSettings:
    """A ProfilerConfig with MediaPipe's defaults filled in."""

    enable_profiler: bool = False
    trace_enabled: bool = False
    trace_log_path: str = ""  # file prefix; "" means <tmp>/mediapipe_trace_
    trace_log_capacity: int = DEFAULT_CAPACITY
    trace_log_interval_usec: int = DEFAULT_INTERVAL_USEC
    trace_log_interval_count: int = DEFAULT_INTERVAL_COUNT
    trace_log_count: int = DEFAULT_LOG_COUNT
    trace_log_disabled: bool = False
    trace_log_instant_events: bool = False
    trace_event_types_disabled: frozenset[int] = frozenset()
    calculator_filter: str = ""
    histogram_interval_size_usec: int = DEFAULT_HISTOGRAM_INTERVAL_USEC
    num_histogram_intervals: int = 1

    @classmethod
    def from_proto(
        cls, config: calculator_pb2.ProfilerConfig, base_dir: str | None = None
    ) -> ProfilerSettings:
        path = config.trace_log_path
        if path and base_dir and not os.path.isabs(path):
            path = os.path.join(base_dir, path)
        return cls(
            enable_profiler=config.enable_profiler,
            trace_enabled=config.trace_enabled,
            trace_log_path=path,
            trace_log_capacity=config.trace_log_capacity or DEFAULT_CAPACITY,
            trace_log_interval_usec=config.trace_log_interval_usec or DEFAULT_INTERVAL_USEC,
            trace_log_interval_count=config.trace_log_interval_count or DEFAULT_INTERVAL_COUNT,
            trace_log_count=config.trace_log_count or DEFAULT_LOG_COUNT,
            trace_log_disabled=config.trace_log_disabled,
            trace_log_instant_events=config.trace_log_instant_events,
            trace_event_types_disabled=frozenset(config.trace_event_types_disabled),
            calculator_filter=config.calculator_filter,
            histogram_interval_size_usec=config.histogram_interval_size_usec
            or DEFAULT_HISTOGRAM_INTERVAL_USEC,
            num_histogram_intervals=config.num_histogram_intervals or 1,
        )

    @property
    def enabled(self) -> bool:
        return self.enable_profiler or self.trace_enabled

    @property
    def writes_files(self) -> bool:
        return self.trace_enabled and not self.trace_log_disabled

    def log_prefix(self) -> str:
        return self.trace_log_path or os.path.join(tempfile.gettempdir(), DEFAULT_PREFIX)


@dataclass
class NodeProfile:
    """MediaPipe's CalculatorProfile for one node, plus recent durations for percentiles."""

    name: str
    calculator: str
    subgraph: str = ""  # the subgraph types it was expanded from, outermost first ("A > B")
    open_runtime_ns: int = 0
    close_runtime_ns: int = 0
    errors: int = 0
    process: Durations = field(default_factory=lambda: Durations(PROFILE_SAMPLES))
    histogram: list[int] = field(default_factory=list)


class _RunProfile:
    """The RunObserver of one run."""

    __slots__ = ("profiler", "run_id", "started")

    def __init__(self, profiler: GraphProfiler, run_id: int) -> None:
        self.profiler = profiler
        self.run_id = run_id
        self.started = time.perf_counter_ns()

    def process(
        self,
        node: int,
        timestamp: int,
        inputs: Sequence[Packet[Any]],
        start: int,
        end: int,
        error: BaseException | None,
    ) -> None:
        profiler = self.profiler
        if not profiler.included[node]:
            return
        if profiler.settings.enable_profiler:
            profile = profiler.profiles[node]
            duration = end - start
            profile.process.add(duration)
            bucket = min(duration // profiler.bucket_ns, len(profile.histogram) - 1)
            profile.histogram[bucket] += 1
            if error is not None:
                profile.errors += 1
        if profiler.trace_process:
            names = profiler.input_names[node]
            packets = tuple(
                (names[i], packet._timestamp)
                for i, packet in enumerate(inputs)
                if not packet.is_empty()
            )
            profiler._trace(PROCESS, node, start, end, timestamp, packets, self.run_id, error)

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        profiler = self.profiler
        if not profiler.included[node]:
            return
        if profiler.settings.enable_profiler:
            profile = profiler.profiles[node]
            if phase == OPEN:
                profile.open_runtime_ns = end - start
            else:
                profile.close_runtime_ns = end - start
        if profiler.settings.trace_enabled and phase in profiler.traced_phases:
            profiler._trace(phase, node, start, end, 0, (), self.run_id, error)

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        pass

    def finished(self, errors: Sequence[GraphError]) -> None:
        self.profiler._run_finished(self)


class GraphProfiler:
    """See the module docstring. A `GraphObserver`; attach it to every run to be profiled."""

    def __init__(self, graph: ValidatedGraph, settings: ProfilerSettings, name: str = "") -> None:
        self.graph = graph
        self.settings = settings
        self.name = name or (graph.path or "graph")
        pattern = re.compile(settings.calculator_filter) if settings.calculator_filter else None
        self.included = [
            pattern is None or pattern.fullmatch(spec.name) is not None for spec in graph.nodes
        ]
        self.profiles = [
            NodeProfile(
                spec.name, spec.calculator_name, " > ".join(use.type for use in spec.subgraphs)
            )
            for spec in graph.nodes
        ]
        for profile in self.profiles:
            profile.histogram = [0] * settings.num_histogram_intervals
        self.bucket_ns = settings.histogram_interval_size_usec * 1000
        self.input_names = [spec.inputs.names for spec in graph.nodes]
        self.traced_phases = {
            phase for phase, number in EVENT_TYPES.items()
            if number not in settings.trace_event_types_disabled
        }  # fmt: skip
        self.trace_process = settings.trace_enabled and PROCESS in self.traced_phases
        self.events: deque[TraceEvent] = deque(maxlen=settings.trace_log_capacity)
        self.dropped = 0
        self._run_ids = itertools.count(1)
        self.active_runs = 0
        self.first_start: int | None = None
        self.last_end: int | None = None
        self.trace_files = TraceFiles(
            self.name,
            [(spec.name, spec.calculator_name) for spec in graph.nodes],
            settings.log_prefix(),
            settings.trace_log_interval_count,
            settings.trace_log_count,
            settings.trace_log_instant_events,
        )
        self.write_interval_ns = settings.trace_log_interval_usec * 1000
        self.next_write_ns = self.trace_files.base_ns + self.write_interval_ns
        self.writing = settings.writes_files  # turned off if the files cannot be written

    @classmethod
    def from_config(
        cls, graph: ValidatedGraph, *, trace_dir: str | None = None, name: str = ""
    ) -> GraphProfiler | None:
        """The profiler the graph's profiler_config asks for, or None.

        `trace_dir` (the server's --trace_dir) turns profiling and tracing on for any graph and
        puts its files in that directory as `<name>_trace_<i>.json`.
        """
        proto = graph.config.proto
        settings = ProfilerSettings.from_proto(proto.profiler_config, graph.directory)
        if trace_dir:
            prefix = os.path.join(trace_dir, f"{_file_safe(name) or 'graph'}_trace_")
            settings = replace(
                settings,
                trace_enabled=True,
                enable_profiler=True,
                trace_log_path=prefix,
                trace_log_disabled=False,
            )
        elif name and not settings.trace_log_path:  # servables must not share one default file
            default = os.path.join(tempfile.gettempdir(), f"{_file_safe(name)}_trace_")
            settings = replace(settings, trace_log_path=default)
        if not settings.enabled:
            return None
        return cls(graph, settings, name)

    # GraphObserver
    def run_started(self, run: GraphRun) -> _RunProfile:
        observer = _RunProfile(self, next(self._run_ids))
        self.active_runs += 1
        if self.first_start is None:
            self.first_start = observer.started
        return observer

    def _run_finished(self, observer: _RunProfile) -> None:
        self.active_runs -= 1
        self.last_end = time.perf_counter_ns()
        if self.writing:
            self.write()

    def _trace(
        self,
        phase: str,
        node: int,
        start: int,
        end: int,
        timestamp: int,
        inputs: tuple[tuple[str, int], ...],
        run: int,
        error: BaseException | None,
    ) -> None:
        events = self.events
        if len(events) == events.maxlen:
            self.dropped += 1
        message = None
        if error is not None:
            message = getattr(error, "message", None) or str(error) or type(error).__name__
        events.append(TraceEvent(phase, node, start, end, timestamp, inputs, run, message))
        if end >= self.next_write_ns and self.writing:
            self.write()

    # --------------------------------------------------------------------------------- output

    @property
    def wall_ns(self) -> int:
        """Time from the first run's start to the last run's end (or now, while running)."""
        if self.first_start is None:
            return 0
        end = self.last_end if self.active_runs == 0 and self.last_end else time.perf_counter_ns()
        return max(0, end - self.first_start)

    def calculator_profiles(self) -> list[dict[str, Any]]:
        """MediaPipe's CalculatorProfile fields per node (microseconds), filtered."""
        profiles = []
        for included, profile in zip(self.included, self.profiles, strict=True):
            if not included:
                continue
            profiles.append(
                {
                    "name": profile.name,
                    "calculator": profile.calculator,
                    "open_runtime": profile.open_runtime_ns // 1000,
                    "close_runtime": profile.close_runtime_ns // 1000,
                    "process_runtime": {
                        "total": profile.process.total // 1000,
                        "interval_size_usec": self.settings.histogram_interval_size_usec,
                        "num_intervals": self.settings.num_histogram_intervals,
                        "count": list(profile.histogram),
                    },
                }
            )
        return profiles

    def summary(self) -> list[dict[str, Any]]:
        """One row per node: calls, total/mean/p99 Process() time (ms), share of wall time."""
        wall = self.wall_ns
        rows = []
        for included, profile in zip(self.included, self.profiles, strict=True):
            if not included:
                continue
            durations = profile.process
            rows.append(
                {
                    "node": profile.name,
                    "calculator": profile.calculator,
                    "subgraph": profile.subgraph,
                    "calls": durations.count,
                    "total_ms": durations.total / 1e6,
                    "mean_ms": durations.mean / 1e6,
                    "p99_ms": percentile(sorted(durations.recent), 99) / 1e6,
                    "wall_share": durations.total / wall if wall else 0.0,
                    "errors": profile.errors,
                }
            )
        return rows

    def format_table(self) -> str:
        """`summary()` as an aligned text table, busiest node first."""
        rows = sorted(self.summary(), key=lambda row: -row["total_ms"])
        width = max([len("node"), *(len(row["node"]) for row in rows)])
        header = (
            f"{'node':<{width}}  {'calls':>7}  {'total ms':>10}  {'mean ms':>9}  "
            f"{'p99 ms':>9}  {'% wall':>6}"
        )
        grouped = any(row["subgraph"] for row in rows)
        header += "  subgraph" if grouped else ""
        lines = [header, "-" * len(header)]
        for row in rows:
            lines.append(
                f"{row['node']:<{width}}  {row['calls']:>7}  {row['total_ms']:>10.3f}  "
                f"{row['mean_ms']:>9.3f}  {row['p99_ms']:>9.3f}  {row['wall_share'] * 100:>5.1f}%"
                + (f"  {row['subgraph']}" if grouped else "")
            )
        lines.append(f"wall time: {self.wall_ns / 1e6:.3f} ms")
        return "\n".join(lines) + "\n"

    def write(self) -> str | None:
        """Write the events recorded since the last write; returns the file, or None if none.

        Blocking file I/O, small (one interval's events), done on the graph's loop. A file that
        cannot be written stops the writing (logged once), not the graph.
        """
        self.next_write_ns = time.perf_counter_ns() + self.write_interval_ns
        if not self.events:
            return None
        events, self.events = list(self.events), deque(maxlen=self.settings.trace_log_capacity)
        try:
            return self.trace_files.write(events)
        except OSError as error:
            self.writing = False
            logger.error("profiler of %s: cannot write trace files, stopped: %s", self.name, error)
            return None

    @property
    def files_written(self) -> list[str]:
        """The trace files written so far, in the order they were first written."""
        return self.trace_files.files_written


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
