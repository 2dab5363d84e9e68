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

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from graphruntime.errors import GraphError
    from graphruntime.packet import Packet
    from graphruntime.scheduler import GraphRun

OPEN = "Open"
PROCESS = "Process"
CLOSE = "Close"

logger = logging.getLogger(__name__)


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
    """Several run observers behind one, so the scheduler always calls exactly one.

    Each observer is isolated from the others: one that raises is logged once and told nothing
    more about the run except that it finished (so it can let go of what it holds), while the
    others go on being told everything. The fan-out itself never raises an `Exception`.
    """

    __slots__ = ("failed", "observers")

    def __init__(self, observers: Sequence[RunObserver]) -> None:
        self.observers: tuple[RunObserver, ...] = tuple(observers)
        self.failed: list[RunObserver] = []  # stopped being told events; still told finished()

    def _failed(self, observer: RunObserver, error: Exception) -> None:
        logger.error("run observer %r failed, not observing this run any more: %r", observer, error)
        self.failed.append(observer)
        self.observers = tuple(other for other in self.observers if other is not observer)

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
            try:
                observer.process(node, timestamp, inputs, start, end, error)
            except Exception as failure:
                self._failed(observer, failure)

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        for observer in self.observers:
            try:
                observer.lifecycle(node, phase, start, end, error)
            except Exception as failure:
                self._failed(observer, failure)

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        for observer in self.observers:
            try:
                observer.packet(stream, packet)
            except Exception as failure:
                self._failed(observer, failure)

    def finished(self, errors: Sequence[GraphError]) -> None:
        for observer in (*self.observers, *self.failed):
            try:
                observer.finished(errors)
            except Exception as failure:
                if observer not in self.failed:  # log each observer once
                    logger.error(
                        "run observer %r failed when the run finished: %r", observer, failure
                    )


def observe_run(observers: Sequence[GraphObserver], run: GraphRun) -> RunObserver | None:
    """The run observer for `run`: None when no one watches, else one or a fan-out.

    A graph observer whose `run_started` raises is logged and skipped for this run; the others
    still watch it.
    """
    found: list[RunObserver] = []
    for graph_observer in observers:
        try:
            observer = graph_observer.run_started(run)
        except Exception as error:
            logger.error(
                "graph observer %r failed to start watching a run: %r", graph_observer, error
            )
            continue
        if observer is not None:
            found.append(observer)
    if not found:
        return None
    return found[0] if len(found) == 1 else RunObservers(found)
