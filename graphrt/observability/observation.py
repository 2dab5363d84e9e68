"""What watches a loaded servable: live statistics, the profiler, request tracing, engine figures.

One `ServableWatch` per loaded servable owns the graph observers that every request's graph run
gets (the live `GraphStats`, the `GraphProfiler` when the graph's profiler_config or --trace_dir
asks for one, and request tracing when it is on) and, for each LLM node, a counter of the tokens
its engine generates, read from the per-step reports the engine already sends (no extra IPC).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from graphruntime.observe import GraphObserver
from graphruntime.profiler import GraphProfiler
from graphruntime.resources import GraphResources
from graphruntime.stats import RATE_WINDOW_SECONDS, GraphStats
from graphruntime.validation import ValidatedGraph
from servables.runtime.thread_runner import PipelineRunner


@dataclass(frozen=True)
class ObservationSettings:
    """Server-wide choices (flags): what to watch on every servable."""

    graph_stats: bool = True  # --graph_stats: live figures for the graph page
    trace_dir: str | None = None  # --trace_dir: profile and trace every graph into this directory
    tracing: GraphObserver | None = None  # OpenTelemetry spans per calculator call, when on


class EngineWatch:
    """Token throughput of one LLM node's engine, from its step reports."""

    def __init__(self, servable: Any) -> None:
        self.servable = servable
        self.tokens = 0
        self._history: deque[tuple[float, int]] = deque()

    def on_step(self, step: Any) -> None:
        self.tokens += sum(len(delta.token_ids) for delta in step.deltas)

    def tokens_per_second(self) -> float:
        now = time.monotonic()
        history = self._history
        if not history or now - history[-1][0] >= 0.5:
            history.append((now, self.tokens))
        while len(history) > 2 and now - history[1][0] >= RATE_WINDOW_SECONDS:
            history.popleft()
        then, tokens = history[0]
        return (self.tokens - tokens) / (now - then) if now > then else 0.0

    def snapshot(self) -> dict[str, Any]:
        engine = self.servable.engine
        metrics = engine.metrics
        return {
            "running": metrics.running,
            "waiting": metrics.waiting,
            "kv_cache_usage_percent": round(metrics.cache_usage, 2),
            "kv_cache_bytes": metrics.kv_cache_bytes,
            "tokens_generated": self.tokens,
            "tokens_per_second": round(self.tokens_per_second(), 2),
            "available": bool(self.servable.available),
        }


class ServableWatch:
    """See the module docstring."""

    def __init__(
        self,
        settings: ObservationSettings,
        name: str,
        graph: ValidatedGraph,
        resources: GraphResources | None,
    ) -> None:
        self.name = name
        self.graph = graph
        self.stats = GraphStats(graph) if settings.graph_stats else None
        self.profiler = GraphProfiler.from_config(graph, trace_dir=settings.trace_dir, name=name)
        self.observers: list[GraphObserver] = []
        if self.stats is not None:
            self.observers.append(self.stats)
        if self.profiler is not None:
            self.observers.append(self.profiler)
        if settings.tracing is not None:
            self.observers.append(settings.tracing)
        self.engines: dict[str, EngineWatch] = {}
        self.pipelines: dict[str, PipelineRunner] = {}
        if resources is not None and settings.graph_stats:
            for per_node in resources.by_side_packet.values():
                for node_name, resource in per_node.items():
                    if hasattr(resource, "engine"):
                        watch = EngineWatch(resource)
                        resource.engine.step_listeners.append(watch.on_step)
                        self.engines[node_name] = watch
                    elif isinstance(runner := getattr(resource, "runner", None), PipelineRunner):
                        self.pipelines[node_name] = runner

    def engine_snapshot(self) -> dict[str, dict[str, Any]]:
        return {node: watch.snapshot() for node, watch in self.engines.items()}

    def pipeline_snapshot(self) -> dict[str, dict[str, Any]]:
        """An image or audio node's pipeline: requests on it and waiting, steps, cancellations."""
        return {
            node: {
                "running": min(runner.in_flight, 1),
                "waiting": runner.queued,
                "requests": runner.stats.requests,
                "steps": runner.stats.steps,
                "cancelled": runner.stats.cancelled,
            }
            for node, runner in self.pipelines.items()
        }

    def close(self) -> None:
        """The servable is unloaded: write the trace events not yet written."""
        for watch in self.engines.values():
            listeners = watch.servable.engine.step_listeners
            if watch.on_step in listeners:
                listeners.remove(watch.on_step)
        if self.profiler is not None and self.profiler.writing:
            self.profiler.write()
