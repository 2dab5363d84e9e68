"""A named graph the server exposes (an OVMS mediapipe_config_list entry) and how requests run it.

Loading validates the graph, builds the resources its nodes declare (an LLM servable and its
engine process, for an LLM graph) and starts them, with the operator's restart policy and queue
bound (graphrt.serving.policy). A servable is available while it is loaded and every
worker process behind it runs: when one dies it is unavailable (the status says why, and
requests get 503 with Retry-After) until its supervisor has restarted it, or for good once the
supervisor gives up. Each HTTP request then runs the graph once:
the request becomes a packet on the graph input tagged HTTP_REQUEST_PAYLOAD, and the packets of
the output tagged HTTP_RESPONSE_PAYLOAD are the response body, chunk by chunk. Unloading waits for
in-flight requests to finish, so a reload never drops a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calculators.http.payload import PAYLOAD_TAGS, REQUEST, RESPONSE
from calculators.http.replies import Reply
from graphrt.observability.observation import ObservationSettings, ServableWatch
from graphrt.serving import policy as serving_policy
from graphrt.serving.policy import ServingPolicy
from graphruntime.config import GraphConfig, load_graph_config, parse_graph_config
from graphruntime.errors import GraphError
from graphruntime.graph import Graph
from graphruntime.packet import Packet
from graphruntime.resources import GraphResources
from graphruntime.services import GraphService
from graphruntime.validation import ValidatedGraph
from servables.errors import InvalidRequest, ServableError, ServableNotReady
from servables.runtime.supervision import Supervisor, SupervisorState

logger = logging.getLogger(__name__)


async def stopped(graph: Graph) -> None:
    """Wait for a cancelled run to end, even if the waiting task is cancelled meanwhile.

    A client that goes away mid-stream makes the handler's write fail, and the handler starts
    cleaning up; then aiohttp cancels the handler for the lost connection while it waits here.
    That cancellation must not cut the wait short: calculators would outlive the request and its
    accounting (in-flight count, metrics) would leak. It is re-raised once the run is over.
    """
    waiter = asyncio.ensure_future(graph.wait_until_done())
    cancelled = False
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            cancelled = True
        except GraphError:
            pass  # the run's failures were reported to the request already
    if cancelled:
        raise asyncio.CancelledError


class State(enum.Enum):
    """OVMS's servable states as /v1/config reports them."""

    START = "START"
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"
    UNLOADING = "UNLOADING"
    END = "END"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True)
class GraphDefinition:
    """Where a servable's graph comes from; two definitions are equal when nothing changed."""

    name: str
    base_path: Path
    graph_path: Path | None = None  # None: `graph_text` was generated in memory
    graph_text: str | None = None
    subconfig: Path | None = None
    version: int = 1
    # Hash of the graph file when the definition was read, so a reload notices graph edits.
    fingerprint: str = ""
    # Why the definition cannot load (a broken subconfig), reported when it is loaded.
    problem: str | None = None
    subgraph_paths: tuple[Path, ...] = ()  # config.json's, searched after the graph's directory


# An `alias: "name"` field of a node's options: a LoRA adapter of an LLM or image node, or a blend
# of them, each served under its own model name.
_ALIAS_FIELD = re.compile(r'\balias:\s*"([^"\\]*)"')


class GraphServable:
    """See the module docstring."""

    def __init__(
        self,
        definition: GraphDefinition,
        request_listeners: Iterable[Any] = (),
        services: Mapping[GraphService[Any], Any] | None = None,
        observation: ObservationSettings | None = None,
        policy: ServingPolicy | None = None,
    ) -> None:
        self.definition = definition
        self.observation = observation or ObservationSettings(graph_stats=False)
        self.watch: ServableWatch | None = None  # set once loaded
        self.policy = policy or ServingPolicy()
        self.request_listeners = list(request_listeners)
        self.services = dict(services or {})
        self.name = definition.name
        self.state = State.START
        self.error: str | None = None
        self.graph: ValidatedGraph | None = None
        self.resources: GraphResources | None = None
        self.request_stream = ""
        self.response_stream = ""
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.loaded_at = 0.0
        self._declared_aliases: list[str] | None = None

    @property
    def available(self) -> bool:
        """AVAILABLE, and every resource behind it can take requests now (an engine process
        may die, and come back, while the servable stays loaded)."""
        if self.state is not State.AVAILABLE or self.resources is None:
            return False
        return all(getattr(r, "available", True) for r in self.resources.all())

    def supervisors(self) -> list[Supervisor]:
        return serving_policy.supervisors(self.resources.all() if self.resources else ())

    def status(self) -> tuple[str, str | None]:
        """OVMS's state name and the reason it is not AVAILABLE: a loaded servable whose
        engine is restarting reports LOADING, one whose engine is down for good UNAVAILABLE."""
        if self.state is State.AVAILABLE and not self.available:
            down = [s for s in self.supervisors() if not s.running]
            reason = next((s.reason for s in down if s.reason), None)
            if any(s.state is SupervisorState.FAILED for s in down):
                return State.UNAVAILABLE.value, reason
            return State.LOADING.value, reason or "an engine process is restarting"
        return self.state.value, None if self.available else self.error

    def retry_after(self) -> float | None:
        """Seconds until every engine behind the servable should be back (None: unknown)."""
        waits = [s.retry_after() for s in self.supervisors() if not s.running]
        known = [w for w in waits if w is not None]
        return max(known) if known and len(known) == len(waits) else None

    def _graph_text(self) -> str:
        definition = self.definition
        if definition.graph_text is not None:
            return definition.graph_text
        assert definition.graph_path is not None
        return definition.graph_path.read_text(encoding="utf-8")

    def _config(self) -> GraphConfig:
        definition = self.definition
        if definition.graph_text is not None:
            graph_file = definition.base_path / "graph.pbtxt"
            return parse_graph_config(definition.graph_text, str(graph_file))
        assert definition.graph_path is not None
        return load_graph_config(definition.graph_path)

    async def load(self) -> None:
        """Validate, build and start; on failure the state is UNAVAILABLE with the reason."""
        self.state = State.LOADING
        started = time.perf_counter()
        logger.info("loading servable %s", self.name)
        try:
            if self.definition.problem:
                raise ServableError(self.definition.problem)
            self.check_before_load()
            graph = ValidatedGraph.from_config(
                self._config(),
                subgraph_paths=[*self.definition.subgraph_paths, *self.policy.subgraph_paths],
            )
            inputs, outputs = graph.input_streams, graph.output_streams
            for request_tag, response_tag in PAYLOAD_TAGS:
                if inputs.has_tag(request_tag) and outputs.has_tag(response_tag):
                    self.request_stream = inputs.names[inputs.id(request_tag)]
                    self.response_stream = outputs.names[outputs.id(response_tag)]
                    break
            resources = GraphResources(graph, self.name)
            max_queued = serving_policy.queue_bound(
                self._graph_text(), self.policy.max_queued_requests
            )
            serving_policy.apply(self.policy, resources.all(), max_queued)
            await resources.start()
        except (GraphError, ServableError, OSError) as error:
            self.state = State.UNAVAILABLE
            self.error = getattr(error, "message", None) or str(error)
            logger.error("servable %s failed to load: %s", self.name, self.error)
            return
        self.graph = graph
        self.resources = resources
        self.watch = ServableWatch(self.observation, self.name, graph, resources)
        for llm in self.llm_servables():
            llm.request_listeners.extend(self.request_listeners)
        self.state = State.AVAILABLE
        self.loaded_at = time.time()
        logger.info("servable %s is available (%.1f s)", self.name, time.perf_counter() - started)

    def check_before_load(self) -> None:
        """What a kind of servable checks before its graph is built (raise a ServableError)."""

    async def unload(self, drain_timeout: float | None = None) -> None:
        """Stop taking requests, let in-flight ones finish (bounded), then stop resources."""
        if self.state is State.AVAILABLE:
            self.state = State.UNLOADING
        try:
            await asyncio.wait_for(self._idle.wait(), drain_timeout)
        except asyncio.TimeoutError:
            logger.warning(
                "servable %s: %d requests still running; unloading anyway",
                self.name,
                self.in_flight,
            )
        if self.watch is not None:
            self.watch.close()
        if self.resources is not None:
            await self.resources.stop()
        self.state = State.END

    @property
    def aliases(self) -> list[str]:
        """Other model names that run this graph: what its resources answer to (an image
        node's LoRA adapters and their blends, each selected by the request's `model`)."""
        if self.resources is None:
            return []
        return [alias for r in self.resources.all() for alias in getattr(r, "aliases", list)()]

    @property
    def declared_aliases(self) -> list[str]:
        """The model names the graph's text gives its adapters, known without loading it, so
        that a request naming one while the graph loads (or after it failed to) is told to
        retry (503) rather than that the model does not exist. A superset of `aliases`:
        adapters merged into the weights at load are listed too, and answer 404 once loaded."""
        if self._declared_aliases is None:
            try:
                text = self._graph_text()
            except OSError:
                text = ""
            self._declared_aliases = _ALIAS_FIELD.findall(text)
        return self._declared_aliases

    def llm_servables(self) -> list[Any]:
        if self.resources is None:
            return []
        return [resource for resource in self.resources.all() if hasattr(resource, "engine")]

    def check_ready(self) -> None:
        """Raise ServableNotReady, with the reason, unless requests can run now."""
        if not self.available or self.graph is None or self.resources is None:
            state, reason = self.status()
            detail = f"{state}: {reason}" if reason else state
            raise ServableNotReady(
                f"Model {self.name} is not available ({detail})", retry_after=self.retry_after()
            )

    @contextlib.asynccontextmanager
    async def graph_run(self) -> AsyncIterator[Graph]:
        """A Graph for one request, with the servable's services; counted as in flight.

        The caller registers pollers, calls `start_run(side_packets)`, feeds and reads it. If the
        block exits before the run is done (an error, a client that went away), the run is
        cancelled and waited for, so no calculator outlives the request.
        """
        self.check_ready()
        assert self.graph is not None
        self.in_flight += 1
        self._idle.clear()
        watch = self.watch
        graph = Graph(
            self.graph,
            services=self.services,
            observers=watch.observers if watch else (),
            profiler=watch.profiler if watch else None,
        )
        try:
            yield graph
        finally:
            try:
                if graph.running:
                    graph.cancel()
                    await stopped(graph)
            finally:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._idle.set()

    @property
    def side_packets(self) -> dict[str, Any]:
        return self.resources.side_packets if self.resources is not None else {}

    async def run_http(self, payload: Any) -> AsyncGenerator[Reply, None]:
        """Run the graph for one HTTP request; yields its replies."""
        if self.available and not (self.request_stream and self.response_stream):
            raise InvalidRequest(
                f"Graph {self.name} does not take HTTP requests (it has no {REQUEST} input "
                f"and {RESPONSE} output)"
            )
        async with self.graph_run() as graph:
            poller = graph.poll_output_stream(self.response_stream)
            await graph.start_run(self.side_packets)
            await graph.add_packet(self.request_stream, Packet(payload, 0))
            graph.close_all_packet_sources()
            async for packet in poller:
                yield packet.payload
            await graph.wait_until_done()
