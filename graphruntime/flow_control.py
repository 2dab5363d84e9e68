"""Flow control: holding back what feeds a graph while a queue downstream of it is full.

A node's input queue is full when it holds `max_queue_size` packets (or the node's
`buffer_size_hint`, whichever is larger). While any queue is full, the graph input streams and
source nodes whose packets reach it are throttled: `Graph.add_packet` waits, and sources are not
scheduled (MediaPipe's throttling). A graph whose calculators are all idle while a throttled feeder
waits is deadlocked; it is reported as an error (`report_deadlock`) or resolved by growing the
full queues, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from graphruntime.errors import GraphError
from graphruntime.node_runtime import GraphInputStream, NodeRuntime, Throttled
from graphruntime.streams import InputStream
from graphruntime.validation import GRAPH_INPUT, ValidatedGraph

logger = logging.getLogger(__name__)


class FlowControl:
    """Which feeders each queue throttles, and which queues are full now."""

    def __init__(
        self,
        graph: ValidatedGraph,
        nodes: Sequence[NodeRuntime],
        inputs: dict[str, GraphInputStream],
        active_sources: set[NodeRuntime],
        schedule: Callable[[NodeRuntime], None],
        fail: Callable[[GraphError], None],
    ) -> None:
        self.graph = graph
        self.nodes = nodes
        self.inputs = inputs
        self.active_sources = active_sources  # the run's own set: sources not yet done
        self.schedule = schedule
        self.fail = fail
        self.full_streams: set[InputStream] = set()
        self.targets: dict[InputStream, tuple[Throttled, ...]] = {}
        self.feeders = self._upstream_feeders()

    def _upstream_feeders(self) -> list[frozenset[Throttled]]:
        """For each node, the graph inputs and sources whose packets reach it (back edges aside)."""
        feeders: list[frozenset[Throttled]] = []
        for node in self.nodes:
            found: set[Throttled] = set()
            for flat_id, name in enumerate(node.spec.inputs.names):
                if flat_id in node.spec.back_edges:
                    continue
                producer_index, _ = self.graph.producers[name]
                if producer_index == GRAPH_INPUT:
                    found.add(self.inputs[name])
                else:
                    found |= feeders[producer_index]
                    if self.nodes[producer_index].is_source:
                        found.add(self.nodes[producer_index])
            feeders.append(frozenset(found))
        return feeders

    def watch(self, queue: InputStream) -> None:
        """Throttle, while `queue` is full, every graph input and source that feeds it."""
        producer_index, _ = self.graph.producers[queue.name]
        if producer_index == GRAPH_INPUT:
            targets: set[Throttled] = {self.inputs[queue.name]}
        else:
            producer = self.nodes[producer_index]
            targets = set(self.feeders[producer_index])
            if producer.is_source:
                targets.add(producer)
        self.targets[queue] = tuple(targets)

    def on_full(self, stream: InputStream, full: bool) -> None:
        delta = 1 if full else -1
        if full:
            self.full_streams.add(stream)
        else:
            self.full_streams.discard(stream)
        for target in self.targets[stream]:
            target.throttle += delta
            if target.throttle == 0:
                self._unthrottled(target)

    def _unthrottled(self, target: Throttled) -> None:
        if isinstance(target, GraphInputStream):
            waiters, target.waiters = target.waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        elif isinstance(target, NodeRuntime):
            self.schedule(target)

    def deadlocked(self) -> bool:
        """Whether, with every calculator idle, a full queue holds back a waiting feeder."""
        if not self.full_streams:
            return False
        return any(s.throttle and s.waiters for s in self.inputs.values()) or any(
            source.throttle for source in self.active_sources
        )

    def resolve_deadlock(self) -> None:
        stream = next(iter(self.full_streams))
        if self.graph.report_deadlock:
            self.fail(
                GraphError(
                    "Detected a deadlock due to input throttling for input stream: "
                    f'"{stream.name}" of a node "{stream.node.name}". All calculators are idle '
                    "while packet sources "
                    'remain active and throttled. Consider adjusting "max_queue_size" or '
                    '"report_deadlock".'
                )
            )
            return
        for full in list(self.full_streams):
            full.max_size = len(full.queue) + 1
            logger.warning(
                'Resolved a deadlock by increasing max_queue_size of input stream: "%s" of a node '
                '"%s" to %d. Consider increasing max_queue_size for better performance.',
                full.name,
                full.node.name,
                full.max_size,
            )
            full.full = False
            self.on_full(full, False)

    def detach(self) -> None:
        """Forget the run's queues and callbacks once it has finished (`GraphRun._release`)."""
        self.targets.clear()
        self.full_streams.clear()
        self.schedule = _ignore
        self.fail = _ignore


def _ignore(_: object) -> None:
    """The callbacks of a finished run's flow control."""
