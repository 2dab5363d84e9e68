"""Live statistics of a graph across all its runs, in bounded memory.

A server runs one graph instance per request, so "how is this node doing" is a question about
every run of the graph at once: `GraphStats` is one `GraphObserver` shared by all of them. It
keeps per node the Process() calls, packets in and out, errors (and the last few messages), a
window of recent call durations for percentiles; per stream the packets sent; and it reads the
input queues of the runs in flight when asked. Memory does not grow with traffic: durations live
in fixed-size rings, error messages in short deques, and finished runs are forgotten.

Rates (calls/s, packets/s) come from comparing snapshots a few seconds apart, so they cost
nothing between snapshots.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphruntime.errors import CalculatorError, GraphCancelledError, GraphError
from graphruntime.packet import Packet
from graphruntime.validation import ValidatedGraph

if TYPE_CHECKING:
    from graphruntime.scheduler import GraphRun

DURATION_WINDOW = 512  # recent Process() durations kept per node, for percentiles
RECENT_ERRORS = 10  # error messages kept per node
MESSAGE_LIMIT = 500  # characters of an error message kept
RATE_WINDOW_SECONDS = 5.0  # rates are averaged over about this long


class Durations:
    """Count and total of every duration, plus the last `window` ones for percentiles."""

    __slots__ = ("count", "max", "recent", "total")

    def __init__(self, window: int = DURATION_WINDOW) -> None:
        self.count = 0
        self.total = 0
        self.max = 0
        self.recent: deque[int] = deque(maxlen=window)

    def add(self, duration: int) -> None:
        self.count += 1
        self.total += duration
        if duration > self.max:
            self.max = duration
        self.recent.append(duration)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The q-th percentile (0-100) of the recent durations, nearest rank; 0 when empty."""
        return percentile(sorted(self.recent), q)


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (the smallest value covering q%)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return float(ordered[min(len(ordered), int(rank)) - 1])


@dataclass
class ErrorRecord:
    time: float  # wall clock (time.time())
    phase: str
    message: str


@dataclass
class NodeStats:
    name: str
    calculator: str
    calls: int = 0
    packets_in: int = 0
    errors: int = 0
    durations: Durations = field(default_factory=Durations)
    recent_errors: deque[ErrorRecord] = field(default_factory=lambda: deque(maxlen=RECENT_ERRORS))

    def failed(self, phase: str, message: str) -> None:
        self.errors += 1
        self.recent_errors.append(ErrorRecord(time.time(), phase, message[:MESSAGE_LIMIT]))


class _RunStats:
    """The RunObserver of one run: writes straight into the shared GraphStats."""

    __slots__ = ("nodes", "run", "stats", "streams")

    def __init__(self, stats: GraphStats, run: GraphRun) -> None:
        self.stats = stats
        self.nodes = stats.nodes
        self.streams = stats.stream_packets
        self.run = run

    def process(
        self,
        node: int,
        timestamp: int,
        inputs: Sequence[Packet[Any]],
        start: int,
        end: int,
        error: BaseException | None,
    ) -> None:
        entry = self.nodes[node]
        entry.calls += 1
        entry.durations.add(end - start)
        entry.packets_in += sum(1 for packet in inputs if not packet.is_empty())

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        pass  # failures arrive with the run's errors, in finished()

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        self.streams[stream] += 1

    def finished(self, errors: Sequence[GraphError]) -> None:
        self.stats._run_finished(self, errors)


class GraphStats:
    """See the module docstring. Attach it to every `Graph` of one servable."""

    def __init__(self, graph: ValidatedGraph) -> None:
        self.graph = graph
        self.nodes = [NodeStats(spec.name, spec.calculator_name) for spec in graph.nodes]
        self.node_index = {spec.name: spec.index for spec in graph.nodes}
        self.stream_packets: dict[str, int] = dict.fromkeys(graph.producers, 0)
        self.runs_started = 0
        self.runs_failed = 0
        self.runs_cancelled = 0
        self.recent_errors: deque[ErrorRecord] = deque(maxlen=RECENT_ERRORS)
        self._active: dict[int, _RunStats] = {}
        self._history: deque[tuple[float, dict[str, int], list[int]]] = deque()

    # GraphObserver
    def run_started(self, run: GraphRun) -> _RunStats:
        self.runs_started += 1
        observer = _RunStats(self, run)
        self._active[id(observer)] = observer
        return observer

    def _run_finished(self, observer: _RunStats, errors: Sequence[GraphError]) -> None:
        self._active.pop(id(observer), None)
        if not errors:
            return
        if all(isinstance(error, GraphCancelledError) for error in errors):
            self.runs_cancelled += 1
            return
        self.runs_failed += 1
        for error in errors:
            if isinstance(error, CalculatorError):
                if isinstance(error.cause, GraphCancelledError):
                    continue
                index = self.node_index.get(error.node)
                if index is not None:
                    self.nodes[index].failed(error.phase, error.message)
                    continue
            if not isinstance(error, GraphCancelledError):
                self.recent_errors.append(
                    ErrorRecord(time.time(), "Graph", error.message[:MESSAGE_LIMIT])
                )

    @property
    def active_runs(self) -> int:
        return len(self._active)

    def queue_depths(self) -> list[int]:
        """Packets waiting at each node's inputs, summed over the runs in flight."""
        depths = [0] * len(self.nodes)
        for observer in self._active.values():
            for index, depth in enumerate(observer.run.queue_depths()):
                depths[index] += depth
        return depths

    def _rates(self, now: float) -> tuple[dict[str, float], list[float]]:
        """Per-second rates of stream packets and node calls over the last few seconds."""
        streams = dict(self.stream_packets)
        calls = [node.calls for node in self.nodes]
        history = self._history
        if not history or now - history[-1][0] >= 0.5:
            history.append((now, streams, calls))
        while len(history) > 2 and now - history[1][0] >= RATE_WINDOW_SECONDS:
            history.popleft()
        then, old_streams, old_calls = history[0]
        elapsed = now - then
        if elapsed <= 0:
            return dict.fromkeys(streams, 0.0), [0.0] * len(calls)
        return (
            {name: (count - old_streams.get(name, 0)) / elapsed for name, count in streams.items()},
            [(count - old) / elapsed for count, old in zip(calls, old_calls, strict=True)],
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything above as plain JSON-ready data (times in milliseconds)."""
        now = time.monotonic()
        stream_rates, call_rates = self._rates(now)
        depths = self.queue_depths()
        producers = self.graph.producers
        packets_out = [0] * len(self.nodes)
        for stream, count in self.stream_packets.items():
            producer, _ = producers[stream]
            if producer >= 0:
                packets_out[producer] += count
        nodes = []
        for index, node in enumerate(self.nodes):
            ordered = sorted(node.durations.recent)
            spec = self.graph.nodes[index]
            nodes.append(
                {
                    "name": node.name,
                    "calculator": node.calculator,
                    "config_index": spec.config_index,
                    "calls": node.calls,
                    "calls_per_second": round(call_rates[index], 3),
                    "packets_in": node.packets_in,
                    "packets_out": packets_out[index],
                    "queue_depth": depths[index],
                    "errors": node.errors,
                    "latency_ms": {
                        "mean": round(node.durations.mean / 1e6, 4),
                        "p50": round(percentile(ordered, 50) / 1e6, 4),
                        "p99": round(percentile(ordered, 99) / 1e6, 4),
                        "max": round(node.durations.max / 1e6, 4),
                    },
                    "recent_errors": [_error_json(error) for error in node.recent_errors],
                }
            )
        return {
            "runs": {
                "started": self.runs_started,
                "active": self.active_runs,
                "failed": self.runs_failed,
                "cancelled": self.runs_cancelled,
            },
            "nodes": nodes,
            "streams": [
                {
                    "name": name,
                    "packets": count,
                    "packets_per_second": round(stream_rates.get(name, 0.0), 3),
                }
                for name, count in sorted(self.stream_packets.items())
            ],
            "recent_errors": [_error_json(error) for error in self.recent_errors],
        }


def _error_json(error: ErrorRecord) -> dict[str, Any]:
    return {"time": error.time, "phase": error.phase, "message": error.message}


__all__ = ["Durations", "GraphStats", "NodeStats", "percentile"]
