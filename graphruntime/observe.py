"""The one place a running graph reports what it does: node calls, packets, errors, queues.

Live statistics, the profiler and request tracing all need the same facts about a run: when each
node's Process() started and ended, on which input packets (streams and timestamps), whether it
failed, how many packets went down each stream, how long the input queues are. Instead of one set
of hooks per consumer, a run reports to a single `RunObserver`, which may fan out to several.

A `GraphObserver` is attached to a `Graph` (it may serve many graphs and runs, e.g. one per
servable); each run asks it for a `RunObserver`. With no observer attached a run pays one `None`
check per call and nothing per packet. Everything is called on the run's event loop, never
concurrently; times are `time.perf_counter_ns()` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from graphruntime.errors import GraphError
    from graphruntime.packet import Packet
    from graphruntime.scheduler import GraphRun

OPEN = "Open"
PROCESS = "Process"
CLOSE = "Close"


class RunObserver(Protocol):
    """Told what one graph run does; see the module docstring."""

    def process(
        self,
        node: int,
        timestamp: int,
        inputs: Sequence[Packet[Any]],
        start: int,
        end: int,
        error: BaseException | None,
    ) -> None:
        """A Process() call of node `node` (its index in `ValidatedGraph.nodes`) ended.

        `inputs` holds one packet per input stream of the node (empty packets where nothing
        arrived), valid only during this call. `error` is what the call raised (None on success
        and on StatusStop; a CancelledError when the run was stopped under it).
        """

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        """Open() or Close() (`phase` OPEN / CLOSE) of node `node` ended."""

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        """A packet went down `stream` (graph inputs included)."""

    def finished(self, errors: Sequence[GraphError]) -> None:
        """The run ended; `errors` are its failures (empty when it succeeded)."""


class GraphObserver(Protocol):
    """Attached to a `Graph`; gives each of its runs a `RunObserver` (or None to skip it)."""

    def run_started(self, run: GraphRun) -> RunObserver | None: ...


class RunObservers:
    """Several run observers behind one, so the scheduler always calls exactly one."""

    __slots__ = ("observers",)

    def __init__(self, observers: Sequence[RunObserver]) -> None:
        self.observers = tuple(observers)

    def process(
        self,
        node: int,
        timestamp: int,
        inputs: Sequence[Packet[Any]],
        start: int,
        end: int,
        error: BaseException | None,
    ) -> None:
        for observer in self.observers:
            observer.process(node, timestamp, inputs, start, end, error)

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        for observer in self.observers:
            observer.lifecycle(node, phase, start, end, error)

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        for observer in self.observers:
            observer.packet(stream, packet)

    def finished(self, errors: Sequence[GraphError]) -> None:
        for observer in self.observers:
            observer.finished(errors)


def observe_run(observers: Sequence[GraphObserver], run: GraphRun) -> RunObserver | None:
    """The run observer for `run`: None when no one watches, else one or a fan-out."""
    found = [
        observer
        for graph_observer in observers
        if (observer := graph_observer.run_started(run)) is not None
    ]
    if not found:
        return None
    return found[0] if len(found) == 1 else RunObservers(found)
